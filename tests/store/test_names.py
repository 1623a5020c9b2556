"""Names: what one name is, and what is refused with which message (rexrank.store.names).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import pytest

from rexrank.errors import SubmissionError
from support.requests import _request


# ---- names: runs of inner whitespace are one space ---------------------------------------
@pytest.mark.parametrize("variant", ["Med  Versa", "Med \t Versa", "Med\u00a0\u00a0Versa", " Med   Versa "])
def test_model_names_differing_in_inner_whitespace_runs_are_the_same_name(variant):
    from rexrank.store.names import name_key, same_name
    from rexrank.store.policy import check_duplicate

    assert same_name(variant, "Med Versa")
    assert name_key(variant) == name_key("med versa")
    assert not same_name("MedVersa2", "Med Versa")
    first = _request("2026-01-01T00:00:00Z", model_name="Med Versa")
    with pytest.raises(SubmissionError, match="identical resubmission"):  # one model of the namespace
        check_duplicate([first], {**first, "id": "r2", "model_name": variant})


# ---- names: what is refused, with which message; what is one name --------------------------------
def test_name_messages_name_the_character_and_the_position():
    from rexrank.store.names import check_name, check_one_script, check_visible

    with pytest.raises(SubmissionError) as err:
        check_visible("model name", "Med\u200bVersa")
    assert str(err.value) == ("model name contains an invisible or control character (ZERO WIDTH SPACE, U+200B) at "
                              "position 4; remove it")
    with pytest.raises(SubmissionError, match=r"\(U\+0085, U\+0085\) at position 2; remove it$"):
        check_visible("institution", "a\x85b")  # a control character without a Unicode name
    with pytest.raises(SubmissionError, match=r"\(COMBINING GRAPHEME JOINER, U\+034F\) at position 2"):
        check_visible("model name", "a\u034fb")  # default-ignorable, though a combining mark
    check_visible("model name", "Med Versa 2")  # spaces are visible
    with pytest.raises(SubmissionError) as err:
        check_name("model name", "=SUM(A1)")
    assert str(err.value) == ("model name '=SUM(A1)' begins with '=', which spreadsheets read as a formula; begin it "
                              "with a letter or digit")
    with pytest.raises(SubmissionError) as err:
        check_name("institution", "Lab#1")
    assert str(err.value) == ("institution 'Lab#1': character '#' (NUMBER SIGN, U+0023) at position 4 is not allowed; "
                              "names hold letters, digits, spaces and - _ . , ' ( ) & / + : *")
    with pytest.raises(SubmissionError, match=r"\(COMBINING ACUTE ACCENT, U\+0301\) at position 1 is not allowed"):
        check_name("model name", "\u0301A")  # a combining mark with no letter before it
    with pytest.raises(SubmissionError, match="at position 3 is not allowed"):
        check_name("model name", "A \u0301")  # nor after a space
    check_name("model name", "Me\u0301d\u0301\u0302 Versa-2 (v1.5)")  # marks after a letter or a mark; Nd digits
    with pytest.raises(SubmissionError, match=r"character '#' \(NUMBER SIGN, U\+0023\) at position 3 is not allowed"):
        check_name("model name", "e\u0301#")  # a mark after a letter allowed, and the check goes on after it
    with pytest.raises(SubmissionError) as err:
        check_name("model name", "Med\u200bVersa")  # invisible characters: check_visible's message, this label
    assert str(err.value).startswith("model name contains an invisible or control character (ZERO WIDTH SPACE")
    check_name("institution", "Université de Genève")
    with pytest.raises(SubmissionError) as err:
        check_one_script("model name", "MedV\u0435rsa \u03b1")
    assert str(err.value) == ("model name 'MedVеrsa α' mixes Cyrillic and Greek and Latin letters (they look alike); "
                              "write it in one of them")
    check_one_script("model name", "Модель 2")  # one script


def test_url_and_submitter_messages():
    from rexrank.store.names import check_submitter, check_url

    check_url("model URL", "")
    check_url("model URL", "HTTPS://example.org/m?x=1")
    check_url("model URL", "http://example.org/m")
    for url, why in (("ftp://example.org/m", "it must start with http:// or https:// and name a host"),
                     ("https:///path", "it must start with http:// or https:// and name a host"),
                     ("https://example.org/a b", "character ' ' is not allowed"),
                     ("https://example.org/<x>", "character '<' is not allowed"),
                     ("http://[::1", None)):
        with pytest.raises(SubmissionError) as err:
            check_url("model URL", url)
        if why:
            assert str(err.value) == f"model URL {url!r}: {why}"
        else:
            assert str(err.value).startswith(f"model URL {url!r} is not a URL (")
    with pytest.raises(SubmissionError, match=r"^model URL contains an invisible or control character \(ZERO WIDTH SPACE"):
        check_url("model URL", "https://example.org/\u200bm")
    check_submitter("a")
    check_submitter("Org Name.x_y-1")
    with pytest.raises(SubmissionError) as err:
        check_submitter("ali\u0441e")
    assert str(err.value) == ("submitter 'aliсe': a submitter is a Hugging Face user or organisation name (ASCII letters, "
                              "digits, spaces, '.', '_', '-'); character 'с' (CYRILLIC SMALL LETTER ES) is not allowed")
    with pytest.raises(SubmissionError, match="it must start with a letter or digit and be at most 96 characters$"):
        check_submitter("-alice")
    with pytest.raises(SubmissionError, match="it must start with a letter or digit and be at most 96 characters$"):
        check_submitter("a" * 97)
    check_submitter("a" * 96)
    with pytest.raises(SubmissionError, match=r"character '\\x00' \(U\+0000\) is not allowed$"):
        check_submitter("a\x00b")


@pytest.mark.parametrize("variant", [
    "medversa", "MEDVERSA", "Med\u200bVersa", "M\u0435dVersa", "MedVersa\ufe0f", "\x1b[31mMedVersa\x1b[0m",
    "Me\u0301dVersa", "M\u0307edVersa", "MedVersa*", "\uff2d\uff45\uff44Versa", "MedVersa\u034f", "Med\u00adVersa",
    "Med\u202eVersa", "Med\u2060Versa", " MedVersa\t", "MedVersa\n",
])
def test_lookalikes_of_a_name_are_the_same_name(variant):
    from rexrank.store.names import name_key, same_name

    assert same_name(variant, "MedVersa") and name_key(variant) == "medversa"


@pytest.mark.parametrize("a, b", [("MAIRA-2", "MAlRA\u20102"), ("MAIRA-2", "MAIRA\u20132"), ("MAIRA-2", "MAIRA\u22122"),
                                  ("MAIRA-2", "MAIRA\uff0d2"), ("l1I|", "IIII"), ("rn", "m"), ("Rn-X", "M-x"),
                                  ("ab", "a\u00adb"), ("x\u3164y", "xy")])
def test_dash_and_confusable_variants_are_one_name(a, b):
    from rexrank.store.names import same_name

    assert same_name(a, b)


@pytest.mark.parametrize("a, b", [("MedVersa", "MedVersa2"), ("MAIRA-2", "MAIRA2"), ("A-B", "A_B"), ("Med Versa", "MedVersa"),
                                  ("a.b", "ab")])
def test_different_names_stay_different(a, b):
    from rexrank.store.names import same_name

    assert not same_name(a, b)


def test_display_removes_escapes_and_invisible_characters_keeping_lines_when_asked():
    from rexrank.store.names import display

    assert display("\x1b]8;;http://x\x07link\x1b]8;;\x07") == "link"  # OSC hyperlink
    assert display("\x9b31mred") == "red"  # 8-bit CSI
    assert display("a\x1bZb") == "ab"  # two-byte escape
    assert display("x\u00ady\u034fz\ufe0f") == "xyz"
    assert display("a\u2028b\u2029c") == "abc"  # line and paragraph separators
    assert display(12) == "12"
    assert display("a\r\nb\tc", keep_newlines=True) == "a\nb\tc"


# ---- names: scripts and letters without a Unicode name ---------------------------------------
def test_two_scripts_are_a_mix_and_a_letter_without_a_unicode_name_is_none():
    from rexrank.store.names import check_name, check_one_script

    with pytest.raises(SubmissionError) as err:
        check_one_script("institution", "Lab \u0391")  # Latin and Greek (capital alpha)
    assert str(err.value) == "institution 'Lab Α' mixes Greek and Latin letters (they look alike); write it in one of them"
    # a Tangut ideograph is a letter (Lo) that Python's Unicode data gives no name: no script, no error
    check_name("model name", "Model \U00017000")
    check_one_script("model name", "Model \U00017000")
