"""The "not found" rules on hand-made inputs: names the corpus never mentions (as words of one
passage, and as phrases), nouns the corpus never uses, and the share of the question's
IDF-weighted terms the context covers."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Evidence
from graphroute.plugins.synthesizers.builtin import (
    CorpusLexicon,
    NegativeFloor,
    code_words,
    content_terms,
    lexicon_terms,
    negative_reason,
    question_acronyms,
    question_name_pairs,
    question_name_parts,
    question_names,
    question_nouns,
    spelled_acronyms,
    term_coverage,
)

CORPUS = [
    "Travel requests are approved by the employee's line manager.",
    "Hollins Freight plc signed the subscription agreement on 1 April 2023.",
    "The Bristol office is open from 07:00 to 20:00. Gdańsk has a smaller office.",
    "Aschenbrödel is a ballet by Johann Strauss II.",
    "Annual leave is 27 days. Leave requests are approved in Meadow.",
    "The travel agency Roamwise books flights for employees.",
]
LEX = CorpusLexicon.build(CORPUS)
PAIRS = CorpusLexicon.build([*CORPUS, "A fist of iron and the power of steam.", "Harris W. Fawell was born in 1929."], with_pairs=True)


def ev(text: str, score: float = 1.0) -> Evidence:
    return Evidence(id=text[:8], text=text, score=score, document="d", document_id="d")


@pytest.mark.parametrize("question, names", [
    ("Who approves travel requests?", []),
    ("Who won the 2018 FIFA World Cup?", [("fifa", "world", "cup")]),
    ("What is the capital of France?", [("france",)]),
    ("Who wrote Pride and Prejudice?", [("pride", "prejudice")]),
    ("Who is the wife of Kim Jong-chul?", [("kim", "jong", "chul")]),
    ("In what county is the city where Harris W. Fawell was born?", [("harri", "fawell")]),
    ("When does the lease of the Gdańsk office end?", [("gdansk",)]),
    ("Humboldt Peak, in the state where Silverton is located, is part of what range?", [("peak",), ("silverton",)]),
])
def test_question_names_are_capitalised_runs_after_the_first_word(question: str, names: list[tuple[str, ...]]) -> None:
    assert question_names(question) == names


def test_terms_fold_accents_and_drop_stopwords_before_singularising() -> None:
    assert content_terms("Does this Gdańsk office?") == {"gdansk", "office"}
    assert "aschenbrodel" in content_terms("Aschenbrödel")


def test_names_must_occur_together_in_one_passage() -> None:
    assert LEX.has_together(("hollin", "freight"))
    assert LEX.has_together(("gdansk",))
    assert not LEX.has_together(("bristol", "gdansk", "hollin"))  # each known, never together
    assert not LEX.has_together(("france",))
    # a spelling variant of a long word counts (a typo, a transliteration); a short one does not
    assert LEX.has_together(("aschenbrodl",))
    assert not LEX.has_together(("meadw",))


def test_idf_weights_rare_and_unknown_terms_most() -> None:
    assert LEX.idf("france") > LEX.idf("hollin") > LEX.idf("approved")
    assert LEX.passages == len(CORPUS)


def test_term_coverage_is_idf_weighted() -> None:
    # every term of the question is in the text
    assert term_coverage("Who approves travel requests?", [CORPUS[0]], LEX) < 1.0  # "approves" != "approved"
    assert term_coverage("travel requests approved", [CORPUS[0]], LEX) == pytest.approx(1.0)
    # the rare, unknown term weighs more than the common one that is covered
    partial = term_coverage("travel requests to France", [CORPUS[0]], LEX)
    assert 0.0 < partial < 0.5
    assert term_coverage("", [CORPUS[0]], LEX) == 1.0


def test_negative_reason_name_not_in_corpus() -> None:
    floor = NegativeFloor(names_in_corpus=True)
    reason, info = negative_reason("What is the capital of France?", [ev(CORPUS[0])], floor, lambda: LEX)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["france"]
    reason, _ = negative_reason("When did Hollins Freight sign the agreement?", [ev(CORPUS[1])], floor, lambda: LEX)
    assert reason is None


def test_negative_reason_term_coverage_reads_the_first_blocks_only() -> None:
    floor = NegativeFloor(min_term_coverage=0.5, coverage_blocks=1)
    q = "When did Hollins Freight sign the subscription agreement?"
    reason, info = negative_reason(q, [ev(CORPUS[0]), ev(CORPUS[1])], floor, lambda: LEX)
    assert reason == "below_min_term_coverage" and info["term_coverage"] < 0.5
    reason, info = negative_reason(q, [ev(CORPUS[1]), ev(CORPUS[0])], floor, lambda: LEX)
    assert reason is None and info["term_coverage"] >= 0.5


@pytest.mark.parametrize("question", ["???", "\U0001f642", "the of and", "Who is he?"])
def test_a_question_with_no_content_term_is_not_found_when_coverage_is_checked(question: str) -> None:
    reason, _ = negative_reason(question, [ev(CORPUS[0])], NegativeFloor(min_term_coverage=0.2), lambda: LEX)
    assert reason == "no_content_terms"
    assert negative_reason(question, [ev(CORPUS[0])], NegativeFloor(), lambda: LEX)[0] is None  # the check off
    # a question in a script without spaces is words, not symbols
    assert negative_reason("谁批准旅行？", [ev(CORPUS[0])], NegativeFloor(min_term_coverage=0.2), lambda: LEX)[0] != "no_content_terms"


def test_lexicon_is_not_built_when_the_checks_are_off() -> None:
    def fail() -> CorpusLexicon:
        raise AssertionError("the lexicon was built")

    assert negative_reason("What is the capital of France?", [ev(CORPUS[0])], NegativeFloor(), fail)[0] is None


def test_name_pairs_stay_inside_one_name_and_skip_initials() -> None:
    assert question_name_pairs("Who is the Chief Financial Officer of Larkspur Systems?") == [
        ("chief", "financial"), ("financial", "officer"), ("larkspur", "system")]
    assert question_name_pairs("In what county is the city where Harris W. Fawell was born?") == [("harri", "fawell")]
    assert question_name_pairs("Who approves travel requests?") == []


def test_name_phrase_must_stand_in_the_corpus_not_only_its_words() -> None:
    floor = NegativeFloor(names_in_corpus=True, name_phrases=True)
    # "fist" and "power" share a passage but never stand together: not found
    reason, info = negative_reason("When was the country that produced Fist Power taken?", [ev(CORPUS[0])], floor, lambda: PAIRS)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["fist power"]
    # a phrase with an initial between its words, and one written as in the corpus, are found
    for q in ("Where was Harris W. Fawell born?", "When did Hollins Freight sign the agreement?"):
        assert negative_reason(q, [ev(CORPUS[1])], floor, lambda: PAIRS)[0] is None
    # without name_phrases the words of one passage are enough
    assert negative_reason("When was Fist Power taken?", [ev(CORPUS[0])], NegativeFloor(names_in_corpus=True), lambda: PAIRS)[0] is None


def test_question_nouns_skip_a_verb_the_parser_makes_the_root() -> None:
    assert question_nouns("How much does the company contribute to employees' pensions?") == ["company", "employee", "pension"]
    assert "begin" not in question_nouns("On what date does the year-end change freeze begin?")
    # the kind of answer asked for ("which year") is not what the question is about
    assert question_nouns("In which year was the city near Lake Baikal founded?") == ["city", "lake", "baikal"]
    assert question_nouns("On which sea coast is the city where Johannes Hevelius worked?") == [
        "city", "johanne", "heveliu"]
    assert question_nouns("What kind of plane dropped the bomb?") == ["bomb"]


def test_absent_noun_says_not_found_and_a_known_one_does_not() -> None:
    floor = NegativeFloor(absent_nouns=True)
    reason, info = negative_reason("Are pets allowed in the office?", [ev(CORPUS[2])], floor, lambda: LEX)
    assert reason == "noun_not_in_corpus" and info["nouns_not_in_corpus"] == ["pet"]
    # every noun is in the corpus (plurals folded): the rule lets the question through
    assert negative_reason("How many days of annual leave do employees get?", [ev(CORPUS[4])], floor, lambda: LEX)[0] is None


def test_punctuation_ends_a_name() -> None:
    # two names in a list are two names, not one phrase "Freeman Robert" the corpus must hold
    q = "What movie stars Morgan Freeman, Robert De Niro and the producer of The Jewel of the Nile?"
    assert question_names(q)[:2] == [("morgan", "freeman"), ("robert", "de", "niro")]
    assert ("freeman", "robert") not in question_name_pairs(q)
    # a quotation mark before the first word does not make that word part of a name
    assert question_names('"Who wrote Pride and Prejudice?') == [("pride", "prejudice")]
    corpus = CorpusLexicon.build(["Morgan Freeman starred with Robert De Niro."], with_pairs=True)
    floor = NegativeFloor(names_in_corpus=True, name_phrases=True)
    assert negative_reason("Did Morgan Freeman, Robert De Niro act together?", [ev("x")], floor, lambda: corpus)[0] is None



def test_a_possessive_ends_a_name() -> None:
    # "the School of Engineering's CFD licence": the school and the product are two names,
    # which a corpus writes apart ("Sorrel CFD, for the School of Engineering")
    q = "How many tokens does the School of Engineering's CFD licence allow?"
    assert question_names(q) == [("school", "engineering"), ("cfd",)]
    assert ("engineering", "cfd") not in question_name_pairs(q)
    assert question_names("Which songs are on the Beatles' Abbey Road?") == [("beatle",), ("abbey", "road")]
    corpus = CorpusLexicon.build(["Sorrel CFD, for the School of Engineering, has 64 tokens."], with_pairs=True)
    floor = NegativeFloor(names_in_corpus=True, name_phrases=True)
    assert negative_reason(q, [ev("x")], floor, lambda: corpus)[0] is None
    # a name the corpus lacks is still not found on either side of the possessive
    assert negative_reason("What is the School of Chemistry's CFD licence?", [ev("x")], floor, lambda: corpus)[0] == (
        "name_not_in_corpus")

NAMES = NegativeFloor(names_in_corpus=True, name_phrases=True)


def test_a_camel_case_word_holds_its_parts() -> None:
    assert {"mac", "os", "maco"} <= lexicon_terms("Install it on macOS 13.")
    assert {"power", "shell"} <= lexicon_terms("Run PowerShell as an administrator.")
    corpus = CorpusLexicon.build(["Installing on macOS\nThe cache lives in ~/Library/Caches."], with_pairs=True)
    assert negative_reason("Where does an installation on a Mac keep its cache?", [ev("x")], NAMES, lambda: corpus)[0] is None
    # a word that merely starts with the same letters is another word
    machine = CorpusLexicon.build(["Each machine keeps its cache in /var/cache."], with_pairs=True)
    reason, info = negative_reason("Where does an installation on a Mac keep its cache?", [ev("x")], NAMES, lambda: machine)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["mac"]
    # the parts stand side by side for the name-phrase check: "Power Shell" is in "PowerShell"
    shell = CorpusLexicon.build(["Run PowerShell as an administrator."], with_pairs=True)
    assert negative_reason("What does Power Shell run?", [ev("x")], NAMES, lambda: shell)[0] is None


def test_acronyms_are_spelled_out_by_names_and_headings_only() -> None:
    assert question_acronyms("What does the FAQ say about NASA and the FAQs?") == {"faq", "nasa"}
    assert "faq" in spelled_acronyms("Frequently asked questions\nCan I back up two machines?")
    assert {"fda", "da"} <= spelled_acronyms("Grant Full Disk Access to the daemon.")
    assert "be" in spelled_acronyms("The Bank of England sets the rate.")
    # the initials of running words are chance, not an acronym
    assert "faq" not in spelled_acronyms("Five apples quietly ripened. Few are quite ready.")


def test_an_acronym_the_corpus_spells_out_is_found() -> None:
    q = "What does the FAQ suggest before a backup?"
    faq = CorpusLexicon.build(["Frequently asked questions\nStop the database before a backup."], with_pairs=True)
    assert negative_reason(q, [ev("x")], NAMES, lambda: faq)[0] is None
    chance = CorpusLexicon.build(["Five apples quietly ripened before a backup."], with_pairs=True)
    reason, info = negative_reason(q, [ev("x")], NAMES, lambda: chance)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["faq"]


def test_a_nationality_before_a_name_describes_it() -> None:
    texts = ["A Fachhochschule is a university of applied sciences.", "German is spoken in Austria and Switzerland."]
    q = "What is a German Fachhochschule called in the Netherlands?"
    # "German" and "Fachhochschule" never share a passage, yet only the country is missing
    reason, info = negative_reason(q, [ev("x")], NAMES, lambda: CorpusLexicon.build(texts, with_pairs=True))
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["netherland"]
    found = CorpusLexicon.build([*texts, "The Netherlands calls it a hogeschool."], with_pairs=True)
    assert negative_reason(q, [ev("x")], NAMES, lambda: found)[0] is None
    # the describer must itself be in the corpus
    no_german = CorpusLexicon.build([texts[0], "The Netherlands calls it a hogeschool."], with_pairs=True)
    reason, info = negative_reason(q, [ev("x")], NAMES, lambda: no_german)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["german fachhochschule"]
    # two names the corpus holds apart are still not found together (no describer among them)
    assert negative_reason("Did Bristol Hollins approve the leave?", [ev(CORPUS[4])], NAMES, lambda: PAIRS)[0] == "name_not_in_corpus"


LAPTOPS = CorpusLexicon.build([
    "Laptops are refreshed every three years.",
    "Early replacement needs a reason from the line manager.",
    "Report a lost laptop to the IT Service Desk within 24 hours.",
    "Pensions are paid by the provider.",
    "The office opens at 08:00 and closes at 18:00.",
    "Travel requests are approved by the line manager.",
    "Leave requests are approved in Meadow.",
])


def test_coverage_leaves_out_verbs_and_adverbs_the_corpus_never_uses() -> None:
    floor = NegativeFloor(min_term_coverage=0.5, coverage_blocks=1)
    context = [ev("Laptops are refreshed every three years.")]
    reason, info = negative_reason("How often are laptops replaced?", context, floor, lambda: LAPTOPS)
    assert reason is None and info["wording_not_in_corpus"] == ["often", "replaced"]
    strict = NegativeFloor(min_term_coverage=0.5, coverage_blocks=1, skip_absent_wording=False)
    assert negative_reason("How often are laptops replaced?", context, strict, lambda: LAPTOPS)[0] == "below_min_term_coverage"
    # a noun or adjective the corpus never uses still weighs the most
    reason, info = negative_reason("How often are laptop batteries replaced?", context, floor, lambda: LAPTOPS)
    assert reason == "below_min_term_coverage" and "battery" not in info["wording_not_in_corpus"]


def test_words_written_as_code_are_flags_identifiers_and_schemes_not_numbers() -> None:
    assert code_words("Does --fast work with upload.timeout, keep_hourly and ftp://?") == {
        "--fast", "upload.timeout", "keep_hourly", "ftp://"}
    # a full stop after one is the sentence's; abbreviations, numbers and versions are not code
    assert code_words("Run vdrift init.") == set()
    assert code_words("In the U.S., e.g. at 9 a.m., availability was 98.7% in 2.1.") == set()


def test_code_the_corpus_never_writes_is_not_found() -> None:
    corpus = CorpusLexicon.build(["[upload] section\ntimeout (default 30). The --dry-run flag of verify checks packs."])
    floor = NegativeFloor(names_in_corpus=True)
    reason, info = negative_reason("What is the default value of upload.timeout?", [ev("x")], floor, lambda: corpus)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["upload.timeout"]
    reason, info = negative_reason("What does the --fast flag of verify do?", [ev("x")], floor, lambda: corpus)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["--fast"]
    assert negative_reason("What does the --dry-run flag of verify do?", [ev("x")], floor, lambda: corpus)[0] is None
    # a key of a configuration shown in INI or TOML form is written as "section.key"
    config = CorpusLexicon.build(["Example:\n[upload]\n; seconds\ntimeout = 30\n\nThen restart. Note: keys are read once."])
    assert negative_reason("What is the default value of upload.timeout?", [ev("x")], floor, lambda: config)[0] is None
    reason, info = negative_reason("What is the default value of upload.note?", [ev("x")], floor, lambda: config)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["upload.note"]


def test_a_name_joining_two_names_is_found_when_each_one_is() -> None:
    q = "How are Hollins Freight and Roamwise related?"
    assert question_names(q) == [("hollin", "freight", "roamwise")]
    assert question_name_parts(q) == {("hollin", "freight", "roamwise"): [("hollin", "freight"), ("roamwise",)]}
    shipped = NegativeFloor(names_in_corpus=True, name_phrases=True, coordinated_names=True)
    # the two names stand in different passages: found as two names, not as one
    assert negative_reason(q, [ev(CORPUS[1])], shipped, lambda: PAIRS)[0] is None
    reason, info = negative_reason(q, [ev(CORPUS[1])], NegativeFloor(names_in_corpus=True, name_phrases=True), lambda: PAIRS)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["hollin freight roamwise"]
    # one of them is nowhere: still not found
    reason, info = negative_reason("How are Hollins Freight and Quillmoor related?", [ev(CORPUS[1])], shipped, lambda: PAIRS)
    assert reason == "name_not_in_corpus" and info["names_not_in_corpus"] == ["hollin freight quillmoor"]
    # "of" joins words of one name, not two names
    assert question_name_parts("Who is the Chief Financial Officer of Larkspur Systems?") == {}
