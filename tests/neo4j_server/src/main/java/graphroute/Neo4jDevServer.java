package graphroute;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Starts Neo4j Community (embedded) with Bolt on 127.0.0.1 for graphroute's tests.
 *
 * <p>Why a launcher instead of a distribution tarball: the jars come from Maven Central
 * through Maven's own cache, so CI and developers get the same pinned release with nothing
 * else to install. Environment: NEO4J_PORT (default 7687), NEO4J_PASSWORD (default
 * "graphroute-dev"), NEO4J_HOME_DIR (default ./run), NEO4J_EXTRA_SETTINGS (more neo4j.conf
 * lines, ';'-separated, replacing a default of the same name). Writes $home/ready (the Bolt address)
 * once Bolt accepts connections; stops cleanly on SIGTERM.
 */
public final class Neo4jDevServer {
    private Neo4jDevServer() {}

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        int port = Integer.parseInt(env("NEO4J_PORT", "7687"));
        String password = env("NEO4J_PASSWORD", "graphroute-dev");
        Path home = Path.of(env("NEO4J_HOME_DIR", "run")).toAbsolutePath();
        Files.createDirectories(home);
        Path ready = home.resolve("ready");
        Files.deleteIfExists(ready);

        // Settings by name in a generated neo4j.conf: the builder's typed setters would tie
        // this file to internal setting classes that move between releases.
        Path conf = home.resolve("neo4j.conf");
        Map<String, String> settings = new LinkedHashMap<>();
        for (String line : new String[] {
                "server.bolt.enabled=true",
                "server.bolt.listen_address=127.0.0.1:" + port,
                "server.bolt.tls_level=DISABLED",
                "server.http.enabled=false",
                "server.https.enabled=false",
                "dbms.security.auth_enabled=true",
                // tests try a wrong password on purpose: never lock the dev user out
                "dbms.security.auth_max_failed_attempts=0",
                "server.memory.pagecache.size=256m",
                "db.tx_log.rotation.retention_policy=2 files",
                // logs are pruned only at a checkpoint, every 15 minutes by default: graphroute
                // perf's write rounds logged ~10 GB in 5 minutes and filled a disk
                "db.checkpoint.interval.time=1m",
                "dbms.usage_report.enabled=false",
                // graphroute's procedures (neo4j-procedures/, put here by neo4j.sh)
                "server.directories.plugins=" + home.resolve("plugins")}) {
            put(settings, line);
        }
        // NEO4J_EXTRA_SETTINGS: more neo4j.conf lines, separated by ';'; a setting named here
        // replaces the one above (Neo4j refuses a setting declared twice), so measuring a
        // server setting needs no rebuild of this launcher
        for (String line : env("NEO4J_EXTRA_SETTINGS", "").split(";")) {
            put(settings, line);
        }
        StringBuilder text = new StringBuilder();
        settings.forEach((k, v) -> text.append(k).append('=').append(v).append('\n'));
        Files.writeString(conf, text.toString(), StandardCharsets.UTF_8);
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .loadPropertiesFromFile(conf)
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                dbms.shutdown();
            } finally {
                try {
                    Files.deleteIfExists(ready);
                } catch (IOException ignored) {
                    // best effort
                }
                stopped.countDown();
            }
        }, "neo4j-shutdown"));

        try {
            setPassword(dbms, password);
            waitForBolt(port);
        } catch (RuntimeException e) {
            e.printStackTrace();
            System.exit(1); // runs the shutdown hook; the launcher script sees the exit
        }

        Path tmp = home.resolve("ready.tmp");
        Files.writeString(tmp, "bolt://127.0.0.1:" + port + "\n", StandardCharsets.UTF_8);
        Files.move(tmp, ready, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        System.out.printf("neo4j ready on bolt://127.0.0.1:%d after %.1f s%n", port, (System.nanoTime() - t0) / 1e9);
        System.out.flush();
        stopped.await();
    }

    /** The known dev password, never "change required": tests and CI log in directly. */
    private static void setPassword(DatabaseManagementService dbms, String password) {
        try {
            dbms.database("system").executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $pw CHANGE NOT REQUIRED", Map.of("pw", password));
        } catch (RuntimeException e) {
            // a restart on an existing data dir: the password is already the one asked for
            String msg = String.valueOf(e.getMessage());
            if (!msg.contains("cannot be the same")) {
                throw e;
            }
        }
    }

    private static void waitForBolt(int port) throws InterruptedException {
        for (int i = 0; i < 600; i++) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 500);
                return;
            } catch (IOException e) {
                Thread.sleep(100);
            }
        }
        throw new IllegalStateException("Bolt did not open on port " + port);
    }

    /** Adds one {@code key=value} line (blank lines skipped), replacing an earlier value. */
    private static void put(Map<String, String> settings, String line) {
        int eq = line.indexOf('=');
        if (eq > 0) {
            settings.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
        }
    }

    private static String env(String key, String fallback) {
        String v = System.getenv(key);
        return v == null || v.isEmpty() ? fallback : v;
    }
}
