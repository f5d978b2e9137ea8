package graphroute.procedures;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Relationship;
import org.neo4j.graphdb.RelationshipType;
import org.neo4j.graphdb.ResourceIterable;
import org.neo4j.graphdb.ResourceIterator;
import org.neo4j.graphdb.Transaction;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;

/**
 * {@code graphroute.push}: the ppr stage's forward push (Andersen, Chung and Lang) run inside
 * the database, so a question costs one call instead of a store round trip per frontier.
 *
 * <p>It walks the same typed graph and keeps the same invariant as the client push of
 * {@code plugins/expanders/local_ppr.py}: a node is read (its edges of the walked types to
 * Entity, TextChunk and Section nodes, weighted by the edge rules of {@code _weights}) when
 * its residual reaches {@code eps} times its weighted degree, and once read it is pushed down
 * to {@code drain * eps} times its degree. Until a node is read, the weights of its edges to
 * nodes already read are a lower bound of its degree, and its read stops as soon as its degree
 * shows it cannot be pushed before its residual doubles (a hub the walk barely reaches costs a
 * few of its edges; {@link #STOP_FACTOR}). So when it returns every residual is below
 * {@code eps * deg}, and each score is below the exact one by at most
 * {@code eps * d * deg / ((1 - d) Z)}: the same bound.
 *
 * <p>It pushes in rounds, as the client push does: every node over its threshold at the start
 * of a round is read and pushed with the residual it holds then, and what they spread waits
 * for the next round. So both engines rank alike. Why not one node at a time (first in, first
 * out): that meets the same bound but ranks route5_unified's entities worse (on the MuSiQue
 * slice their top 10 agrees 0.81 with the exact solve's, in rounds 0.86, for a quarter more
 * edges read).
 *
 * <p>Arguments: the group, the seed ids (a node's {@code id} property) and their weights, and a
 * config map: {@code damping}, {@code eps}, {@code drain}, {@code types} (the walked edge types),
 * {@code weights} (the path weights by name: entity, section, similar, shares, hub, mentions,
 * title), {@code stop_factor} ({@link #STOP_FACTOR} when not given), {@code typed_degrees}
 * (false: a long read never looks its node's relationship counts up; {@link #LOOKUP_AFTER})
 * {@code max_rows} (the most edges one call reads; past it the push stops and says
 * {@code truncated}) and {@code spread} (optional: the remainder's spread of
 * {@code spread_remainder} in local_ppr.py, done here to spare the client a round trip for
 * the degrees; {@link Walk#spread}). One row: the touched nodes' ids, labels and scores (those above zero),
 * and the walk's stats, among them where its time went ({@code seeds_ms}: finding the seeds,
 * {@code walk_ms}: the push; {@code server_ms} in all).
 */
public final class LocalPush {
    /** What the walk does and returns; the client uses a procedure of the version it knows only. */
    public static final long VERSION = 3;

    @Context
    public Transaction tx;

    /** The one row the procedure yields. */
    public static final class Output {
        public List<String> ids;
        public List<String> labels;
        public List<Double> scores;
        public Map<String, Object> stats;
    }

    @Procedure(name = "graphroute.push", mode = Mode.READ)
    @Description("graphroute.push(group, seeds, weights, config): personalised PageRank by forward push from "
            + "weighted seeds over graphroute's typed graph; yields ids, labels, scores, stats")
    public Stream<Output> push(
            @Name("group") String group,
            @Name("seeds") List<String> seeds,
            @Name("weights") List<Double> weights,
            @Name("config") Map<String, Object> config) {
        if (seeds.size() != weights.size()) {
            throw new IllegalArgumentException("seeds and weights differ in length: " + seeds.size() + " and " + weights.size());
        }
        Walk walk = new Walk(tx, config);
        return Stream.of(walk.run(group, seeds, weights));
    }

    static final Label GRNODE = Label.label("GRNode");

    /**
     * A read that stops early goes on until the degree passes this many times {@code r / eps}.
     * A node is read again only once its residual passes {@code eps} times the degree its last
     * read found, so at 2 its residual has at least doubled by then and its reads together cost
     * at most about twice its last one. At 1 a node that gains a little mass each round is read
     * again each round. At a million generated sentences, reads that stopped were 86% of
     * route5_unified's rows and 88% of route2_local's at 1; at 2 they read 75% and 35% as many
     * rows. What is pushed, and so every score, does not depend on it.
     */
    static final double STOP_FACTOR = 2.0;

    /**
     * A read that has gone through this many relationships looks the node up by its
     * relationship counts per type ({@code typedDegree}), and stops there when they show that
     * it would stop: a hub the walk barely reaches costs this many rows and a few look-ups, not
     * every edge up to its threshold. Above Neo4j's dense-node threshold (50 relationships),
     * where those counts are kept per type, so the look-up does not walk the node's edges. A
     * read that ends sooner never looks: most reads are short (route5_unified's stopped reads
     * at a million generated sentences: ~18 rows), and a look-up costs more than they do.
     */
    static final long LOOKUP_AFTER = 64;

    /** Node kinds: 1 + the label's place among the walked labels (0: any other label). */
    static final String[] WALK_LABELS = {"Entity", "TextChunk", "Section"};
    static final int ENTITY = 1;
    static final int CHUNK = 2;
    static final int SECTION = 3;

    static int kindOf(Object label) {
        for (int i = 0; i < WALK_LABELS.length; i++) {
            if (WALK_LABELS[i].equals(label)) {
                return i + 1;
            }
        }
        return 0;
    }

    /** The code of an edge type, as {@code _CODES} of local_ppr.py (0: not walked). */
    static int codeOf(String type) {
        return switch (type) {
            case "RELATION", "CO_OCCURS" -> 1;
            case "SEMANTICALLY_SIMILAR" -> 2;
            case "SHARES_ENTITY" -> 3;
            case "HAS_HUB_ENTITY" -> 4;
            case "MENTIONS" -> 5;
            case "IN_SECTION" -> 6;
            case "OWN_PAGE" -> 7;
            default -> 0;
        };
    }

    /** The far end's kind of an edge of type {@code code} ({@link #codeOf}) of a node of
     * {@code kind}, where the two decide it ({@code OTHER_END} of local_ppr.py); 0 where they
     * do not. */
    static int otherEnd(int kind, int code) {
        return switch (kind) {
            case ENTITY -> switch (code) {
                case 1, 2 -> ENTITY;
                case 4 -> SECTION;
                case 7 -> CHUNK;
                default -> 0;
            };
            case CHUNK -> switch (code) {
                case 5, 7 -> ENTITY;
                case 6 -> SECTION;
                default -> 0;
            };
            case SECTION -> switch (code) {
                case 6 -> CHUNK;
                case 2, 3 -> SECTION;
                case 4 -> ENTITY;
                default -> 0;
            };
            default -> 0;
        };
    }

    static double number(Map<String, Object> m, String key, double fallback) {
        Object v = m.get(key);
        return v instanceof Number n ? n.doubleValue() : fallback;
    }

    /** A map of node ids to ints without boxing (open addressing, linear probing): the walk
     * looks nodes up for every edge end it reads; with boxed HashMaps (and the edge type
     * switched on twice) it took 11% longer at a million sentences. */
    static final class LongIntMap {
        private long[] keys = new long[2048];
        private int[] values = new int[2048];
        private boolean[] used = new boolean[2048];
        private int size;

        private int index(long key) {
            long h = key * 0x9E3779B97F4A7C15L;
            return (int) (h ^ (h >>> 32)) & (keys.length - 1);
        }

        /** The value of {@code key}, or {@code absent}. */
        int get(long key, int absent) {
            for (int i = index(key);; i = (i + 1) & (keys.length - 1)) {
                if (!used[i]) {
                    return absent;
                }
                if (keys[i] == key) {
                    return values[i];
                }
            }
        }

        void put(long key, int value) {
            if (2 * (size + 1) > keys.length) {
                long[] k = keys;
                int[] v = values;
                boolean[] u = used;
                keys = new long[2 * k.length];
                values = new int[2 * k.length];
                used = new boolean[2 * k.length];
                size = 0;
                for (int j = 0; j < k.length; j++) {
                    if (u[j]) {
                        put(k[j], v[j]);
                    }
                }
            }
            int i = index(key);
            while (used[i] && keys[i] != key) {
                i = (i + 1) & (keys.length - 1);
            }
            if (!used[i]) {
                used[i] = true;
                keys[i] = key;
                size++;
            }
            values[i] = value;
        }
    }

    static final class Walk {
        private final Transaction tx;
        private final double d;
        private final double eps;
        private final double drain;
        private final long maxRows;
        private final RelationshipType[] types;
        private final double wEntity, wSection, wSimilar, wShares, wHub, wMentions, wTitle;

        private final LongIntMap slotOf = new LongIntMap();
        private final LongIntMap kinds = new LongIntMap(); // node id -> kind, its label read once
        private final HashMap<Integer, String> missing = new HashMap<>(); // slot -> id of a seed the group lacks
        private int n;
        private long[] nodeId = new long[1024]; // -1: a seed the group lacks
        private double[] r = new double[1024];
        private double[] q = new double[1024];
        private double[] deg = new double[1024]; // exact once loaded[s], a lower bound before
        private int[] kind = new int[1024];
        private boolean[] loaded = new boolean[1024]; // its edges read (nbr, nw)
        private double[] known = new double[1024]; // weights of its edges to loaded nodes: a lower bound of deg
        private boolean[] pushedOnce = new boolean[1024];
        private boolean[] queued = new boolean[1024];
        private boolean[] typed = new boolean[1024]; // its relationship counts looked up (typedDegree)
        private int[][] nbr = new int[1024][]; // a node's edge ends (parallel edges stay apart: their shares add up)
        private double[][] nw = new double[1024][];
        private long[] ends = new long[64]; // scratch for read()
        private int[] endKinds = new int[64];
        private double[] endWeights = new double[64];

        private final double stopFactor;
        private final boolean typedDegrees;
        private final Map<String, Object> spread; // null: no spread
        private long spreadTo;
        private long rows;
        private long rowsStopped;
        private long typedLookups;
        private long readsSkipped;
        private long pushes;
        private long pushRounds; // rounds that pushed a node, as the client push counts them
        private long stoppedCounts;
        private boolean truncated;

        Walk(Transaction tx, Map<String, Object> config) {
            this.tx = tx;
            this.d = number(config, "damping", 0.5);
            this.eps = number(config, "eps", 1e-4);
            this.drain = number(config, "drain", 1e-3);
            this.maxRows = (long) number(config, "max_rows", 5_000_000);
            this.stopFactor = number(config, "stop_factor", STOP_FACTOR);
            this.typedDegrees = !Boolean.FALSE.equals(config.get("typed_degrees"));
            @SuppressWarnings("unchecked")
            Map<String, Object> sp = (Map<String, Object>) config.get("spread");
            this.spread = sp;
            if (!(d > 0 && d < 1)) {
                throw new IllegalArgumentException("damping must be in (0, 1), not " + d);
            }
            if (!(eps > 0)) {
                throw new IllegalArgumentException("eps must be above 0, not " + eps);
            }
            if (!(stopFactor >= 1)) {
                throw new IllegalArgumentException("stop_factor must be at least 1, not " + stopFactor);
            }
            @SuppressWarnings("unchecked")
            List<String> names = (List<String>) config.getOrDefault("types", List.of());
            this.types = names.stream().map(RelationshipType::withName).toArray(RelationshipType[]::new);
            @SuppressWarnings("unchecked")
            Map<String, Object> w = (Map<String, Object>) config.getOrDefault("weights", Map.of());
            this.wEntity = number(w, "entity", 0);
            this.wSection = number(w, "section", 0);
            this.wSimilar = number(w, "similar", 0);
            this.wShares = number(w, "shares", 0);
            this.wHub = number(w, "hub", 0);
            this.wMentions = number(w, "mentions", 0);
            this.wTitle = number(w, "title", 0);
        }

        /** The weight of an edge of {@code code} between kinds {@code a} and {@code b}: {@code _weights}. */
        double weight(int code, int a, int b) {
            boolean aEnt = a == ENTITY, bEnt = b == ENTITY;
            boolean chunkEntity = (a == CHUNK && bEnt) || (b == CHUNK && aEnt);
            return switch (code) {
                case 1 -> aEnt && bEnt ? wEntity : 0;
                case 2 -> aEnt && bEnt ? wSimilar : (!aEnt && !bEnt ? wSection : 0);
                case 3 -> wShares;
                case 4 -> wHub;
                case 5 -> chunkEntity ? wMentions : 0;
                case 6 -> a == CHUNK || b == CHUNK ? wMentions : 0;
                case 7 -> chunkEntity ? wTitle : 0;
                default -> 0;
            };
        }

        /** A node's kind, its {@code label} property read the first time the walk meets it. */
        private int kind(long id) {
            int k = kinds.get(id, -1);
            if (k < 0) {
                k = kindOf(tx.getNodeById(id).getProperty("label", null));
                kinds.put(id, k);
            }
            return k;
        }

        private void grow() {
            int cap = r.length * 2;
            nodeId = Arrays.copyOf(nodeId, cap);
            r = Arrays.copyOf(r, cap);
            q = Arrays.copyOf(q, cap);
            deg = Arrays.copyOf(deg, cap);
            kind = Arrays.copyOf(kind, cap);
            loaded = Arrays.copyOf(loaded, cap);
            known = Arrays.copyOf(known, cap);
            pushedOnce = Arrays.copyOf(pushedOnce, cap);
            queued = Arrays.copyOf(queued, cap);
            typed = Arrays.copyOf(typed, cap);
            nbr = Arrays.copyOf(nbr, cap);
            nw = Arrays.copyOf(nw, cap);
        }

        /** The slot of node {@code id}, made on first sight. */
        private int slot(long id, int knownKind) {
            int s = slotOf.get(id, -1);
            if (s >= 0) {
                return s;
            }
            int i = newSlot(id);
            slotOf.put(id, i);
            kind[i] = knownKind > 0 ? knownKind : kind(id);
            return i;
        }

        private int newSlot(long id) {
            if (n == r.length) {
                grow();
            }
            nodeId[n] = id;
            return n++;
        }

        /** The push threshold of a slot's residual. */
        private double threshold(int s) {
            return (pushedOnce[s] ? drain * eps : eps) * deg[s];
        }

        private void consider(int s, ArrayDeque<Integer> queue) {
            if (!queued[s] && r[s] > 0 && r[s] >= threshold(s)) {
                queued[s] = true;
                queue.add(s);
            }
        }

        /**
         * Slot {@code s}'s weighted degree over the walked types whose far end its own kind
         * decides ({@link #otherEnd}), from the store's relationship counts: a lower bound of
         * its degree (an entity's MENTIONS may come from sentences, which the walk leaves out),
         * looked up without reading its edges (cheap for a dense node, whose counts the store
         * keeps per type; {@link #LOOKUP_AFTER}).
         */
        private double typedDegree(int s) {
            Node node = tx.getNodeById(nodeId[s]);
            typedLookups++;
            double sum = 0;
            for (RelationshipType t : types) {
                int code = codeOf(t.name());
                int far = otherEnd(kind[s], code);
                double w = far == 0 ? 0 : weight(code, kind[s], far);
                if (w > 0) {
                    sum += w * node.getDegree(t, Direction.BOTH);
                }
            }
            return sum;
        }

        /**
         * Reads slot {@code s}'s weighted edges. Stops once the degree passes {@code cap} (the
         * node cannot be pushed yet; its degree so far is kept as a lower bound) and returns
         * false.
         */
        private boolean read(int s, double cap) {
            long id = nodeId[s];
            int m = 0;
            long seen = 0;
            double sum = 0;
            try (ResourceIterable<Relationship> rels = tx.getNodeById(id).getRelationships(Direction.BOTH, types)) {
                boolean looked = !typedDegrees || typed[s];
                for (Relationship rel : rels) {
                    rows++;
                    seen++;
                    if (!looked && seen > LOOKUP_AFTER) {
                        // a long read: the counts may show now that it would stop
                        looked = typed[s] = true;
                        double low = typedDegree(s);
                        if (low > cap) {
                            deg[s] = Math.max(deg[s], low);
                            stoppedCounts++;
                            rowsStopped += seen;
                            readsSkipped++;
                            return false;
                        }
                    }
                    long o = rel.getOtherNodeId(id);
                    if (o == id) {
                        continue;
                    }
                    int code = codeOf(rel.getType().name());
                    // where the node's label and the type decide the far end, its label is not read
                    int far = otherEnd(kind[s], code);
                    int ok = far;
                    if (ok == 0) {
                        int t = slotOf.get(o, -1);
                        ok = t >= 0 ? kind[t] : kind(o);
                    }
                    if (ok == 0) {
                        continue; // not a node of the walk (a sentence's mention)
                    }
                    double w = weight(code, kind[s], ok);
                    if (w <= 0) {
                        continue;
                    }
                    sum += w;
                    if (sum > cap) {
                        deg[s] = Math.max(deg[s], sum);
                        stoppedCounts++;
                        rowsStopped += seen;
                        return false;
                    }
                    if (m == ends.length) {
                        ends = Arrays.copyOf(ends, 2 * m);
                        endKinds = Arrays.copyOf(endKinds, 2 * m);
                        endWeights = Arrays.copyOf(endWeights, 2 * m);
                    }
                    ends[m] = o;
                    endKinds[m] = ok;
                    endWeights[m++] = w;
                }
            }
            int[] to = new int[m];
            for (int j = 0; j < m; j++) {
                int t = slot(ends[j], endKinds[j]);
                to[j] = t;
                if (!loaded[t]) { // the edge is one of t's too
                    known[t] += endWeights[j];
                    deg[t] = Math.max(deg[t], known[t]);
                }
            }
            nbr[s] = to;
            nw[s] = Arrays.copyOf(endWeights, m);
            deg[s] = sum;
            loaded[s] = true;
            return true;
        }

        /**
         * What each touched slot gains from the remainder's spread ({@code spread_remainder} of
         * local_ppr.py): the {@code pool} best entities and the {@code pool} best chunks by
         * {@code score} (ties at the boundary included, as {@code largest}) get
         * {@code l1 * deg / volume}, where {@code deg} sums each walked type's relationship
         * count times the client's weight for the node's label and that type
         * ({@code degree_weights}: the edge weight where the label decides the far end, the
         * expected weight where it does not). Null without a {@code spread} config.
         */
        private double[] spread(double[] score, double l1) {
            if (spread == null) {
                return null;
            }
            double volume = number(spread, "volume", 0);
            int pool = (int) number(spread, "pool", 0);
            if (!(volume > 0) || !(l1 > 0) || pool <= 0) {
                return null;
            }
            @SuppressWarnings("unchecked")
            Map<String, Map<String, Object>> byLabel = (Map<String, Map<String, Object>>) spread.getOrDefault("weights", Map.of());
            double[] add = new double[n];
            for (int k : new int[] {ENTITY, CHUNK}) {
                Map<String, Object> w = byLabel.getOrDefault(WALK_LABELS[k - 1], Map.of());
                int m = 0;
                int[] mine = new int[n];
                for (int s = 0; s < n; s++) {
                    if (nodeId[s] >= 0 && kind[s] == k && score[s] > 0) {
                        mine[m++] = s;
                    }
                }
                double floor = Double.NEGATIVE_INFINITY;
                if (m > pool) {
                    double[] sorted = new double[m];
                    for (int j = 0; j < m; j++) {
                        sorted[j] = score[mine[j]];
                    }
                    Arrays.sort(sorted);
                    floor = sorted[m - pool];
                }
                for (int j = 0; j < m; j++) {
                    int s = mine[j];
                    if (score[s] < floor) {
                        continue;
                    }
                    Node node = tx.getNodeById(nodeId[s]);
                    double deg = 0;
                    for (RelationshipType t : types) {
                        double tw = number(w, t.name(), 0);
                        if (tw > 0) {
                            deg += tw * node.getDegree(t, Direction.BOTH);
                        }
                    }
                    add[s] = l1 * deg / volume;
                    spreadTo++;
                }
            }
            return add;
        }

        Output run(String group, List<String> seeds, List<Double> weights) {
            long t0 = System.nanoTime();
            double total = 0;
            for (Double w : weights) {
                total += w;
            }
            Output out = new Output();
            if (total <= 0 || seeds.isEmpty()) {
                out.ids = List.of();
                out.labels = List.of();
                out.scores = List.of();
                out.stats = new LinkedHashMap<>(Map.of("version", VERSION));
                return out;
            }
            HashMap<String, Long> found = new HashMap<>();
            for (String seed : seeds) {
                // the (group, id) uniqueness constraint's index: one seek a seed
                Node a = null;
                try (ResourceIterator<Node> it = tx.findNodes(GRNODE, "group", group, "id", seed)) {
                    if (it.hasNext()) {
                        a = it.next();
                    }
                }
                if (a != null) {
                    // the internal id: deprecated as a key across transactions, the cheapest handle within one
                    found.put(seed, a.getId());
                }
            }
            long t1 = System.nanoTime();
            ArrayDeque<Integer> queue = new ArrayDeque<>();
            int[] seedSlots = new int[seeds.size()];
            HashMap<String, Integer> absent = new HashMap<>();
            for (int i = 0; i < seeds.size(); i++) {
                Long id = found.get(seeds.get(i));
                int s;
                if (id != null) {
                    s = slot(id, 0);
                } else { // outside the graph: no edges, keeps its teleport share
                    s = absent.computeIfAbsent(seeds.get(i), x -> newSlot(-1));
                    missing.put(s, seeds.get(i));
                    loaded[s] = true;
                    nbr[s] = new int[0];
                    nw[s] = new double[0];
                }
                seedSlots[i] = s;
                r[s] += weights.get(i) / total;
            }
            for (int s : seedSlots) {
                consider(s, queue);
            }
            rounds:
            while (!queue.isEmpty()) {
                // this round's nodes: those over their threshold now; the mass they spread
                // queues the next round's
                int[] cand = new int[queue.size()];
                int kept = 0;
                for (int c = 0; c < cand.length; c++) {
                    int s = queue.poll();
                    queued[s] = false;
                    if (!loaded[s]) {
                        if (rows >= maxRows) {
                            truncated = true;
                            break rounds;
                        }
                        // read only until its degree puts it below the threshold stopFactor times over
                        double cap = stopFactor * r[s] / eps;
                        if (deg[s] > cap) { // its known edges already show what a read would: not yet
                            stoppedCounts++;
                            readsSkipped++;
                            continue;
                        }
                        if (!read(s, cap)) {
                            continue;
                        }
                    }
                    if (r[s] > 0 && r[s] >= threshold(s)) {
                        cand[kept++] = s;
                    }
                }
                double[] mass = new double[kept];
                for (int c = 0; c < kept; c++) {
                    int s = cand[c];
                    mass[c] = r[s];
                    q[s] += r[s];
                    r[s] = 0;
                    pushedOnce[s] = true;
                }
                pushes += kept;
                if (kept > 0) {
                    pushRounds++;
                }
                for (int c = 0; c < kept; c++) {
                    int s = cand[c];
                    if (deg[s] <= 0) {
                        continue; // no typed edge: its mass teleports back, it stays where it is
                    }
                    double share = d * mass[c] / deg[s];
                    int[] to = nbr[s];
                    double[] w = nw[s];
                    for (int j = 0; j < to.length; j++) {
                        r[to[j]] += share * w[j];
                        consider(to[j], queue);
                    }
                }
            }
            long t2 = System.nanoTime();
            double sIso = 0;
            double residual = 0;
            int read = 0;
            for (int s = 0; s < n; s++) {
                if (loaded[s] && deg[s] <= 0) {
                    sIso += q[s];
                }
                residual += r[s];
                if (loaded[s]) {
                    read++;
                }
            }
            double z = sIso + (1.0 - sIso) / (1.0 - d);
            double l1 = d * residual / ((1.0 - d) * z);
            double[] score = new double[n];
            for (int s = 0; s < n; s++) {
                score[s] = (q[s] + r[s]) / z;
            }
            double[] add = spread(score, l1);
            List<String> ids = new ArrayList<>();
            List<String> labels = new ArrayList<>();
            List<Double> scores = new ArrayList<>();
            for (int s = 0; s < n; s++) {
                if (score[s] <= 0) {
                    continue;
                }
                if (nodeId[s] < 0) { // a seed the group lacks keeps its share, as in the exact solvers
                    ids.add(missing.get(s));
                    labels.add("");
                } else {
                    Node node = tx.getNodeById(nodeId[s]);
                    ids.add((String) node.getProperty("id", null));
                    labels.add(kind[s] > 0 ? WALK_LABELS[kind[s] - 1] : (String) node.getProperty("label", ""));
                }
                scores.add(add == null ? score[s] : score[s] + add[s]);
            }
            Map<String, Object> stats = new LinkedHashMap<>();
            stats.put("nodes_touched", (long) n);
            stats.put("nodes_read", (long) read);
            stats.put("nodes_counted", (long) read); // a degree is known exactly once the edges are read
            stats.put("rows_read", rows);
            stats.put("pushes", pushes);
            stats.put("rounds", pushRounds);
            stats.put("counts_stopped", stoppedCounts);
            stats.put("rows_stopped", rowsStopped);
            stats.put("degrees_looked_up", typedLookups);
            stats.put("reads_skipped", readsSkipped);
            stats.put("residual", residual / z);
            stats.put("error_bound", eps * d / ((1.0 - d) * z));
            stats.put("l1_error_bound", l1);
            stats.put("spread_to", spreadTo);
            stats.put("truncated", truncated);
            // seeds with a typed edge, as the client push counts them: a seed found in the group
            // is always read at least in part, so a degree above zero says it has one
            stats.put("seeds_in_graph", Arrays.stream(seedSlots).distinct().filter(s -> deg[s] > 0).count());
            stats.put("seeds_ms", (t1 - t0) / 1e6);
            stats.put("walk_ms", (t2 - t1) / 1e6);
            stats.put("server_ms", (System.nanoTime() - t0) / 1e6);
            stats.put("version", VERSION);
            out.ids = ids;
            out.labels = labels;
            out.scores = scores;
            out.stats = stats;
            return out;
        }
    }
}
