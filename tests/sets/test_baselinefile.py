"""The baseline file: canonical text, stable re-writes, and every malformed file exit 2 at its line."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.errors import SetError
from evalkit.records import BaselineEntry
from evalkit.sets.baselinefile import baseline_path, baseline_text, load_baseline_file, write_baseline

SET_ID = "acme_search.faq"
FOLDER = Path("baselines")
ENTRY = BaselineEntry(
    provider="prod",
    model="gpt-4o-mini",
    reported_model="gpt-4o-mini-2024-07-18",
    grader="deterministic",
    run_id="run-1",
    accepted_at="2026-01-02T03:04:05Z",
    evalkit_version="0.9.0",
    set_fingerprint="fp1",
    prompt_count=2,
    passed_count=1,
    pass_rate=0.5,
    mean_score=0.75,
    items={"opening-hours": (True, 1.0), "greeting": (False, 0.5)},
)
# The file ENTRY is written as: its line numbers are what the malformed cases below point at.
TEXT = """\
{
  "baselines": [
    {
      "accepted_at": "2026-01-02T03:04:05Z",
      "evalkit_version": "0.9.0",
      "grader": "deterministic",
      "items": {
        "greeting": {
          "passed": false,
          "score": 0.5
        },
        "opening-hours": {
          "passed": true,
          "score": 1.0
        }
      },
      "mean_score": 0.75,
      "model": "gpt-4o-mini",
      "pass_rate": 0.5,
      "passed_count": 1,
      "prompt_count": 2,
      "provider": "prod",
      "reported_model": "gpt-4o-mini-2024-07-18",
      "run_id": "run-1",
      "set_fingerprint": "fp1"
    }
  ],
  "format": "evalkit-baseline/1",
  "set": "acme_search.faq"
}
"""
FILE = f"baselines/{SET_ID}.json"
FIX = "fix it by hand, or delete the file and re-create it with `evalkit baseline accept`"
AGAIN = "remove this entry and accept its run again with `evalkit baseline accept`"


def malformed(text: str, name: str = f"{SET_ID}.json") -> SetError:
    path = FOLDER / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SetError) as caught:
        load_baseline_file(path)
    assert caught.value.exit_code == 2
    return caught.value


def messages(error: SetError) -> list[str]:
    return [str(issue) for issue in error.issues]


def test_the_path_is_the_set_id_in_the_folder() -> None:
    assert baseline_path(Path("b"), SET_ID) == Path("b/acme_search.faq.json")


def test_a_missing_file_is_none() -> None:
    assert load_baseline_file(FOLDER / f"{SET_ID}.json") is None


def test_write_creates_the_folder_and_the_canonical_text() -> None:
    path = write_baseline(FOLDER / "nested", SET_ID, ENTRY)
    assert path == FOLDER / "nested" / f"{SET_ID}.json"
    assert path.read_bytes() == TEXT.encode("utf-8")
    assert baseline_text(SET_ID, [ENTRY]) == TEXT
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left


def test_round_trip() -> None:
    loaded = load_baseline_file(write_baseline(FOLDER, SET_ID, ENTRY))
    assert loaded is not None
    assert loaded.set_id == SET_ID
    assert loaded.entries == (ENTRY,)
    assert loaded.entry_for(*ENTRY.scope) == ENTRY


def test_accepting_the_same_run_again_writes_the_same_bytes_and_keeps_accepted_at() -> None:
    path = write_baseline(FOLDER, SET_ID, ENTRY)
    first = path.read_bytes()
    write_baseline(FOLDER, SET_ID, dataclasses.replace(ENTRY, accepted_at="2027-05-06T07:08:09Z"))
    assert path.read_bytes() == first


def test_another_run_of_the_scope_replaces_the_entry_and_its_accepted_at() -> None:
    write_baseline(FOLDER, SET_ID, ENTRY)
    newer = dataclasses.replace(ENTRY, run_id="run-2", accepted_at="2027-05-06T07:08:09Z")
    loaded = load_baseline_file(write_baseline(FOLDER, SET_ID, newer))
    assert loaded is not None
    assert loaded.entries == (newer,)


def test_a_second_scope_is_added_in_scope_order() -> None:
    later = dataclasses.replace(ENTRY, provider="zeta", run_id="run-z")
    earlier = dataclasses.replace(ENTRY, grader="decision", run_id="run-d")
    write_baseline(FOLDER, SET_ID, later)
    write_baseline(FOLDER, SET_ID, ENTRY)
    path = write_baseline(FOLDER, SET_ID, earlier)
    loaded = load_baseline_file(path)
    assert loaded is not None
    assert loaded.entries == (earlier, ENTRY, later)
    runs = [entry["run_id"] for entry in json.loads(path.read_text(encoding="utf-8"))["baselines"]]
    assert runs == ["run-d", "run-1", "run-z"]
    assert path.read_text(encoding="utf-8") == baseline_text(SET_ID, [later, earlier, ENTRY])


def test_repeats_are_written_only_when_more_than_one() -> None:
    items = {"opening-hours": (1.0, 1.0), "greeting": (1 / 3, 0.5)}
    sampled = dataclasses.replace(ENTRY, repeats=3, passed_count=4, pass_rate=4 / 6, items=items)
    text = baseline_text(SET_ID, [sampled])
    assert '"repeats": 3,' in text
    assert '"pass_rate": 0.3333333333333333,' in text  # each prompt's fraction of samples passed
    assert '"repeats"' not in baseline_text(SET_ID, [ENTRY])
    loaded = load_baseline_file(write_baseline(FOLDER, SET_ID, sampled))
    assert loaded is not None
    assert loaded.entries == (sampled,)


def test_two_entries_of_one_scope_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="one scope"):
        baseline_text(SET_ID, [ENTRY, dataclasses.replace(ENTRY, run_id="run-2")])


def test_characters_yaml_refuses_are_written_escaped_and_read_back() -> None:
    odd = dataclasses.replace(ENTRY, reported_model="m\x7f\x85\u2028\x90-é")
    text = baseline_text(SET_ID, [odd])
    assert r'"reported_model": "m\u007f\u0085\u2028\u0090-é"' in text
    loaded = load_baseline_file(write_baseline(FOLDER, SET_ID, odd))
    assert loaded is not None
    assert loaded.entries == (odd,)


def test_a_hand_written_raw_control_character_still_loads() -> None:
    path = FOLDER / f"{SET_ID}.json"
    path.parent.mkdir()
    path.write_text(TEXT.replace("gpt-4o-mini-2024-07-18", "m\x7f"), encoding="utf-8")
    loaded = load_baseline_file(path)
    assert loaded is not None
    assert loaded.entries[0].reported_model == "m\x7f"


def test_invalid_json_names_its_line() -> None:
    error = malformed(TEXT.replace('"pass_rate": 0.5,', '"pass_rate": 0.5,,'))
    assert messages(error) == [
        f"{FILE}:19:24: not valid JSON (Expecting property name enclosed in double quotes); {FIX}"
    ]


def test_a_pass_rate_of_the_wrong_type_names_its_line() -> None:
    error = malformed(TEXT.replace('"pass_rate": 0.5', '"pass_rate": "0.5"'))
    assert messages(error) == [
        f"{FILE}:19:20: baselines[0].pass_rate: must be a number in 0..1, got the string '0.5'; {FIX}"
    ]


def test_a_set_that_is_not_the_file_name_names_its_line() -> None:
    error = malformed(TEXT, name="faq.json")
    assert messages(error) == [
        "baselines/faq.json:29:10: set: is 'acme_search.faq' but the file is named 'faq.json'; "
        "a baseline file must be named <set>.json: rename it to 'acme_search.faq.json' or correct `set`"
    ]


def test_a_second_entry_of_one_scope_names_its_line() -> None:
    data = json.loads(TEXT)
    data["baselines"].append({**data["baselines"][0], "run_id": "run-2"})
    error = malformed(json.dumps(data, indent=2, sort_keys=True))
    assert messages(error) == [
        f"{FILE}:27:5: baselines[1]: a second entry for provider 'prod', model 'gpt-4o-mini', "
        "reported model 'gpt-4o-mini-2024-07-18', grader 'deterministic' (the first is at line 3); keep one of them"
    ]


def test_a_passed_count_its_items_disagree_with_names_its_line() -> None:
    error = malformed(TEXT.replace('"passed_count": 1', '"passed_count": 2'))
    assert messages(error) == [
        f"{FILE}:20:23: baselines[0].passed_count: is 2 but its items' samples that passed add up to 1; {AGAIN}"
    ]


@pytest.mark.parametrize(
    ("old", "new", "where", "says"),
    [
        ('"passed_count": 1', '"passed_count": 3', "20:23: baselines[0].passed_count", "3 passed is more than the 2"),
        ('"prompt_count": 2', '"prompt_count": 3', "7:16: baselines[0].items", "lists 2 prompts but prompt_count is 3"),
        ('"pass_rate": 0.5', '"pass_rate": 0.6', "19:20: baselines[0].pass_rate", "is 0.6 but passed_count / "),
        ('"score": 0.5', '"score": 1.5', "10:20: baselines[0].items.greeting.score", "must be a number in 0..1"),
        ('"passed": false', '"passed": 0', "9:21: baselines[0].items.greeting.passed", "expected true or false"),
        ('"pass_rate": 0.5', '"pass_rate": NaN', "19:20: baselines[0].pass_rate", "must be a finite number"),
        ('"prompt_count": 2', '"prompt_count": -2', "21:23: baselines[0].prompt_count", "0 or more"),
        ('"format": "evalkit-baseline/1"', '"format": "evalkit-baseline/2"', "28:13: format", "evalkit-baseline/1"),
        ('"mean_score": 0.75,', "", "3:5: baselines[0]", "missing required key 'mean_score'"),
        ('"mean_score"', '"mean_scor"', "3:5: baselines[0]", "missing required key 'mean_score'"),
        ('"run_id": "run-1",', '"run_id": "run-1", "run_id": "run-2",', "24:26", "duplicate key 'run_id'"),
        ('"set": "acme_search.faq"', '"set": "Acme"', "29:10: set", "is not a valid set id"),
    ],
)
def test_each_malformed_entry_names_its_place(old: str, new: str, where: str, says: str) -> None:
    assert old in TEXT
    first = messages(malformed(TEXT.replace(old, new, 1)))[0]
    assert first.startswith(f"{FILE}:{where}: ")
    assert says in first
    assert first.endswith(("`evalkit baseline accept`", "keep one of them"))


def test_a_repeated_run_may_pass_more_samples_than_its_passed_items() -> None:
    sampled = (
        TEXT.replace('"passed_count": 1', '"passed_count": 3')
        .replace('"pass_rate": 0.5', '"pass_rate": 0.75,\n      "repeats": 2')
        .replace('"passed": false,', '"pass_rate": 0.5, "passed": false,')
    )
    path = FOLDER / f"{SET_ID}.json"
    path.parent.mkdir()
    path.write_text(sampled, encoding="utf-8")
    loaded = load_baseline_file(path)
    assert loaded is not None
    assert (loaded.entries[0].passed_count, loaded.entries[0].repeats) == (3, 2)
    assert "more than the 4 samples (2 prompts x 2 repeats)" in str(
        malformed(sampled.replace('"passed_count": 3', '"passed_count": 5'))
    )


@pytest.mark.parametrize(
    ("data", "where", "says"),
    [
        (b"", "1:1", "not valid JSON (Expecting value)"),
        (b"[]", "1:1", "expected a mapping, got a list"),
        (b'{\n  "set": "a\xffb"}', "2:12", "not UTF-8 text"),
        ("\ufeff{}".encode(), "1:1", "starts with a byte order mark"),
    ],
)
def test_a_file_that_is_not_a_baseline_document_is_exit_2(data: bytes, where: str, says: str) -> None:
    path = FOLDER / f"{SET_ID}.json"
    path.parent.mkdir()
    path.write_bytes(data)
    with pytest.raises(SetError) as caught:
        load_baseline_file(path)
    assert caught.value.exit_code == 2
    assert str(caught.value.issues[0]).startswith(f"{FILE}:{where}: {says}")


def test_a_malformed_file_is_not_overwritten() -> None:
    broken = TEXT.replace('"pass_rate": 0.5', '"pass_rate": "0.5"')
    malformed(broken)
    with pytest.raises(SetError, match=r"19:20: baselines\[0\]\.pass_rate"):
        write_baseline(FOLDER, SET_ID, dataclasses.replace(ENTRY, run_id="run-2"))
    assert (FOLDER / f"{SET_ID}.json").read_text(encoding="utf-8") == broken


ids = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(str.strip)


@st.composite
def entries(draw: st.DrawFn) -> BaselineEntry:
    repeats = draw(st.integers(1, 4))
    drawn = draw(st.dictionaries(ids, st.tuples(st.integers(0, repeats), st.floats(0, 1)), min_size=1, max_size=6))
    outcomes = {i: (k / repeats, score) for i, (k, score) in drawn.items()}  # samples passed, mean score
    passed = sum(k for k, _ in drawn.values())
    samples = len(outcomes) * repeats
    return BaselineEntry(
        provider=draw(ids),
        model=draw(ids),
        reported_model=draw(ids),
        grader=draw(st.sampled_from(["deterministic", "decision"])),
        run_id=draw(ids),
        accepted_at=draw(ids),
        evalkit_version=draw(ids),
        set_fingerprint=draw(ids),
        prompt_count=len(outcomes),
        passed_count=passed,
        pass_rate=passed / samples,
        mean_score=math.fsum(score for _, score in outcomes.values()) / len(outcomes),
        items=outcomes,
        repeats=repeats,
    )


def unique_scopes(drawn: list[BaselineEntry]) -> list[BaselineEntry]:
    return list({entry.scope: entry for entry in drawn}.values())


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(entries(), min_size=1, max_size=3).map(unique_scopes))
def test_any_baseline_round_trips_through_its_text(drawn: list[BaselineEntry]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = baseline_path(Path(folder), SET_ID)
        text = baseline_text(SET_ID, drawn)
        path.write_bytes(text.encode("utf-8"))
        loaded = load_baseline_file(path)
        assert loaded is not None
        assert loaded.entries == tuple(sorted(drawn, key=lambda e: e.scope))
        assert baseline_text(SET_ID, loaded.entries) == text
