from s2s_desktop.pipeline.chunker import SentenceChunker, clean_for_speech


def chunk(text: str, step: int = 3) -> list[str]:
    """Feed `text` in small deltas as an LLM would, then flush."""
    c = SentenceChunker()
    out = []
    for i in range(0, len(text), step):
        out += c.feed(text[i : i + step])
    return out + c.flush()


def test_sentences_come_out_one_by_one():
    assert chunk("The capital of France is Paris. It is known for the Eiffel Tower.") == [
        "The capital of France is Paris.",
        "It is known for the Eiffel Tower.",
    ]


def test_first_sentence_is_ready_before_the_stream_ends():
    c = SentenceChunker()
    assert c.feed("The capital of France is Paris.") == []  # no whitespace yet: may continue
    assert c.feed(" It") == ["The capital of France is Paris."]


def test_first_clause_goes_out_early_but_not_after_one_word():
    pieces = chunk("Rain forms when water vapour cools, and then it falls as drops. Next one.")
    assert pieces[0] == "Rain forms when water vapour cools,"
    assert chunk("Yes, it does. Sure.")[0] == "Yes, it does."


def test_abbreviations_initials_and_decimals_do_not_split():
    pieces = chunk("Yes. Dr. Smith met J. R. Tolkien at 3.14 p.m. on Monday. Then e.g. tea was "
                   "served.")
    assert pieces == ["Yes.", "Dr. Smith met J. R. Tolkien at 3.14 p.m. on Monday.",
                      "Then e.g. tea was served."]


def test_code_blocks_are_dropped_and_markdown_stripped():
    text = "Here is how:\n```python\nprint('x.')\n```\nThat is **all** 😀! See https://www.example.com/a/b."
    pieces = chunk(text, step=2)
    assert pieces == ["Here is how:", "That is all!", "See example.com."]
    assert not any("print" in p for p in pieces)


def test_lists_and_headings_become_plain_pieces():
    assert chunk("# Steps\n1. Boil water\n2. Add tea\n- enjoy it") == [
        "Steps", "Boil water", "Add tea", "enjoy it"]


def test_only_emoji_or_markup_is_not_spoken():
    assert chunk("😀🎉 ** ** ---") == []
    assert clean_for_speech("[the docs](http://x.org/y) say <b>hi</b>") == "the docs say hi"


def test_a_long_sentence_is_cut_at_a_clause():
    long = ("First short one. " + "word " * 30 + ", and then more words follow here.")
    pieces = chunk(long)
    assert pieces[0] == "First short one."
    assert len(pieces) == 3


def test_a_long_first_sentence_goes_out_before_a_joining_word():
    pieces = chunk("A refrigerator keeps food cold by pumping heat out of the box. It hums.")
    assert pieces == ["A refrigerator keeps food cold", "by pumping heat out of the box.", "It hums."]
    # a preposition, once a long tail follows it
    assert chunk("The opposite is a term used in the context of physics to describe mass.") == [
        "The opposite is a term used", "in the context of physics to describe mass."]
    # ...not before a short tail, nor one bound to the word before
    for whole in ("Boil is a process where water turns into steam.",
                  "The Second World War ended in 1945.",
                  "The capital city of the country France is Paris.",
                  "The game was stopped on the day due to heavy rain."):
        assert chunk(whole) == [whole]
    # a joining word too early, or in a later sentence, does not cut
    assert chunk("Rain falls when clouds get heavy with water.") == [
        "Rain falls when clouds get heavy with water."]
    assert chunk("Yes. The sea looks blue to us because water absorbs red light.") == [
        "Yes.", "The sea looks blue to us because water absorbs red light."]


def test_a_joining_word_still_being_written_is_not_cut_before():
    c = SentenceChunker()
    assert c.feed("Bread rises in the oven because") == []  # "because" may be "becausal"…
    assert c.feed(" yeast") == ["Bread rises in the oven"]


LONG_FIRST = {
    "The boiling point of water is a measure that describes the temperature at which it "
    "turns into steam.": "The boiling point of water",
    "The primary colors are the only two colors that cannot be made by mixing other "
    "colors.": "The primary colors",
    "The longest river in Africa is the Nile River.": "The longest river in Africa",
    "Honey is a sweet food made by bees from the nectar of flowers.":
        "Honey is a sweet food made",
    "Leap years have one extra day added at the end of the month of February.":
        "Leap years have one extra day added",
}
SHORT_FIRST = ("The capital of Japan is Tokyo.", "A spider has eight legs.",
               "Mount Everest is the tallest mountain in the world.",
               "The capital city of the country France is Paris.", "It's 11:31.",
               "The game was stopped on the day due to heavy rain.")


def test_a_long_first_sentence_is_split_whether_streamed_or_given_whole():
    for sentence, first in LONG_FIRST.items():
        for pieces in (chunk(sentence + " It is so."), chunk(sentence + " It is so.", 500)):
            assert pieces[0] == first, pieces
            assert " ".join(pieces) == sentence + " It is so."  # nothing lost or repeated
            assert len(pieces[0].split()) <= 8


def test_a_short_first_sentence_is_not_split():
    for sentence in SHORT_FIRST:
        for step in (3, 500):
            assert chunk(sentence + " More follows.", step)[0] == sentence


def test_a_first_sentence_goes_out_at_its_subject_once_the_predicate_runs_on():
    c = SentenceChunker()
    assert c.feed("The boiling point of water is 100") == []  # "is 100." would be whole
    assert c.feed(" degrees Celsius") == ["The boiling point of water"]
    assert c.flush() == ["is 100 degrees Celsius"]
    # a later sentence is not cut at its verb
    assert chunk("Yes. The boiling point of water is 100 degrees Celsius.") == [
        "Yes.", "The boiling point of water is 100 degrees Celsius."]
