"""``read_plan(path)`` is the pair ``rebuild_plan(load_meta(path))`` (docs/contract.md §9):
the same plan, or exactly the same error (type, path, message), for every file. Its own
fast path may consume the document it decoded and steps back to the pair's path on
anything unexpected; these tests hold it to the pair on malformed files, on the strict
rebuild laws' cases, on the 300 older artifacts and on drawn damaged files."""

from __future__ import annotations

import json
import random
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import shardplan
from shardplan import api
from shardplan.artifact.meta import load_meta, meta_to_bytes
from shardplan.errors import MetaError
from tests import strategies
from tests.cases import MALFORMED, ODD_VALUES, PRODUCERS, REFUSED_STRICTLY, bases, planted
from tests.helpers import CORPUS, CORPUS_FILES
from tests.older_artifacts import frozen_again_bytes

TRUSTED = strategies.TARGET_ENTRIES


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a read gives: the plan's frozen bytes, or the error's type, path and message."""
    try:
        plan = call()
    except Exception as exc:  # noqa: BLE001 - any error must be the pair's, exactly
        return ("error", type(exc), getattr(exc, "path", None), str(exc))
    return ("plan", meta_to_bytes(api.freeze_plan(plan)))


def both(path: Path, allow_targets: Any = TRUSTED) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """read_plan's outcome and the pair's, for the file at ``path``."""
    read = outcome(lambda: shardplan.read_plan(path, allow_targets=allow_targets))
    pair = outcome(lambda: shardplan.rebuild_plan(load_meta(path), allow_targets=allow_targets))
    return read, pair


def test_read_plan_reads_what_write_plan_wrote(tmp_path: Path) -> None:
    plan = strategies.random_plan(3)
    path = tmp_path / "codegen_meta.json"
    shardplan.write_plan(plan, path)
    rebuilt = shardplan.read_plan(path, allow_targets=TRUSTED)
    assert rebuilt.modules.keys() == plan.modules.keys()
    assert meta_to_bytes(api.freeze_plan(rebuilt)) == path.read_bytes()


@pytest.mark.parametrize(("raw", "where", "fragment"), MALFORMED)
def test_a_malformed_file_gives_the_pairs_error(
    tmp_path: Path, raw: bytes, where: str, fragment: str
) -> None:
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(raw)
    read, pair = both(path, allow_targets=())
    assert read == pair
    assert read[:3] == ("error", MetaError, where) and fragment in read[3]


@pytest.mark.parametrize("case", sorted(REFUSED_STRICTLY))
def test_the_strict_laws_refusals_are_the_pairs(tmp_path: Path, case: str) -> None:
    document, where = REFUSED_STRICTLY[case]
    path = tmp_path / "codegen_meta.json"
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    read, pair = both(path, allow_targets=("json.dumps",))
    assert read == pair
    assert read[0] == "error" and read[2].startswith(where), read


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 39), seed=st.integers(0, 2**32), value=st.sampled_from(ODD_VALUES))
def test_law_1_holds_for_read_plan_as_for_the_pair(
    tmp_path_factory: pytest.TempPathFactory, index: int, seed: int, value: Any
) -> None:
    """A drawn document with an odd value planted (test_laws): read_plan and the pair agree,
    and what they accept freezes back to the file's bytes."""
    document = planted(bases()[index], random.Random(seed), value)
    path = tmp_path_factory.mktemp("law") / "codegen_meta.json"
    raw = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    path.write_bytes(raw)
    read, pair = both(path)
    assert read == pair
    if read[0] == "plan":
        assert read[1] == raw


def test_the_300_older_artifacts_read_to_the_pairs_plan_and_back_to_their_bytes(
    tmp_path: Path,
) -> None:
    with tarfile.open(CORPUS / "drawn_before_one_vocabulary.tar.xz", mode="r:xz") as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        artifacts = [(m.name, archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]
    assert len(artifacts) == 300
    differ = []
    for name, data in artifacts:
        path = tmp_path / name
        path.write_bytes(data)
        read, pair = both(path, allow_targets=TRUSTED)
        if read != pair or read != ("plan", frozen_again_bytes(data)):
            differ.append(name)
    assert differ == []


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_the_producers_corpus_reads_to_the_pairs_plan(path: Path) -> None:
    read, pair = both(path, allow_targets=PRODUCERS)
    assert read == pair and read[0] == "plan"


# ------------------------------------------------------------------ drawn damage

# Bytes a damaged artifact is likely to hold in the wrong place: JSON's own tokens,
# placement texts, a Target's key.
DAMAGE_BYTES = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"0", b"-1", b"2.0", b"1e400",
                b"NaN", b"null", b"true", b" ", b"\n", b"S(", b"R", b"\\u003a", b"\xff",
                b'"_target_": "json.dumps", ', b'"x": ']  # fmt: skip


def damaged(raw: bytes, rng: random.Random) -> bytes:
    """``raw`` with one defect: a line repeated (a key given twice) or dropped, bytes
    put in, replaced or cut out, the file cut short, or the whole written compact."""
    lines = raw.split(b"\n")
    at = rng.randrange(len(raw) + 1)
    kind = rng.randrange(7)
    if kind == 0:
        line = rng.randrange(len(lines))
        lines.insert(line, lines[line])
        return b"\n".join(lines)
    if kind == 1:
        del lines[rng.randrange(len(lines))]
        return b"\n".join(lines)
    if kind == 2:
        return raw[:at] + rng.choice(DAMAGE_BYTES) + raw[at:]
    if kind == 3:
        return raw[:at] + rng.choice(DAMAGE_BYTES) + raw[at + rng.randrange(1, 8) :]
    if kind == 4:
        return raw[: at - rng.randrange(0, 3)] + raw[at:] if at else raw[1:]
    if kind == 5:
        return raw[:at]
    return json.dumps(json.loads(raw), separators=(",", ":")).encode()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 39), seed=st.integers(0, 2**32))
def test_a_damaged_file_gives_read_plan_and_the_pair_the_same_plan_or_the_same_error(
    tmp_path_factory: pytest.TempPathFactory, index: int, seed: int
) -> None:
    raw = (json.dumps(bases()[index], indent=2, sort_keys=True) + "\n").encode()
    path = tmp_path_factory.mktemp("damaged") / "codegen_meta.json"
    path.write_bytes(damaged(raw, random.Random(seed)))
    read, pair = both(path)
    assert read == pair


# ------------------------------------------------------------------ the one pass and its way back


@pytest.fixture
def fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths read_plan reads again on the pair's path (its fallback), as it reads them."""
    taken: list[Path] = []
    pair_reader = api.load_meta

    def counting(path: Any, **kwargs: Any) -> Any:
        taken.append(Path(path))
        return pair_reader(path, **kwargs)

    monkeypatch.setattr(api, "load_meta", counting)
    return taken


def test_the_one_pass_reads_every_canonical_artifact_without_the_pairs_path(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """The 300 older artifacts, the producers' corpus and a file write_plan wrote are all
    read by the consuming pass: were it never taken (or always given up), the pair's path
    would read each of them again."""
    with tarfile.open(CORPUS / "drawn_before_one_vocabulary.tar.xz", mode="r:xz") as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        artifacts = [archive.extractfile(m).read() for m in members]  # type: ignore[union-attr]
    for number, data in enumerate(artifacts):
        path = tmp_path / f"older-{number}.json"
        path.write_bytes(data)
        shardplan.read_plan(path, allow_targets=TRUSTED)
    for path in CORPUS_FILES:
        shardplan.read_plan(path, allow_targets=PRODUCERS)
    written = tmp_path / "written.json"
    shardplan.write_plan(strategies.random_plan(5), written)
    shardplan.read_plan(written, allow_targets=TRUSTED)
    assert fallbacks == []


def _entry_file(tmp_path: Path, text: str) -> Path:
    """A file of one module whose entry's text is ``text`` (written by hand, so a key can
    repeat), in the indented layout or any other."""
    path = tmp_path / "codegen_meta.json"
    path.write_text(
        '{"param_plan": {"m": {' + text + '}}, "injections": [], "frozen_sharded_params": []}\n'
    )
    return path


def test_a_repeated_key_is_found_by_the_count_and_named_by_the_pair(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """msgspec keeps the last of two equal keys; the decoded entry then has one member fewer
    than the file's ':' bytes, so the pass's plan is not used."""
    path = _entry_file(tmp_path, '"is_boundary": true, "is_boundary": false')
    read, pair = both(path)
    assert read == pair and read[0] == "error" and "repeats the key 'is_boundary'" in read[3]
    assert fallbacks == [path]


def test_a_colon_inside_a_string_sends_the_file_to_the_pair_which_reads_it(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    path = tmp_path / "codegen_meta.json"
    plan = strategies.random_plan(2)
    plan.other_keys = {"note": "a:b, and \\u003a too"}
    shardplan.write_plan(plan, path)
    read, pair = both(path)
    assert read == pair and read[0] == "plan"
    assert fallbacks == [path]


def test_nesting_past_the_writers_depth_is_refused_as_the_pair_refuses_it(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """Lists hold no members, so the count cannot see depth: the pass bounds it itself, in
    the values it walks and those it only counts (an other producer's key, a rule's object)."""
    for deep in ("[" * 600 + "]" * 600, '{"a": ' * 600 + "1" + "}" * 600):
        path = tmp_path / "codegen_meta.json"
        path.write_text('{"injections": [], "other": ' + deep + ', "param_plan": {}}\n')
        read, pair = both(path)
        assert read == pair and read[0] == "error", read
        path.write_text(
            '{"injections": [{"match": "m", "ep_stack": {"x": ' + deep + "}}], "
            '"param_plan": {"m": {}}}\n'
        )
        read, pair = both(path)
        assert read == pair and read[0] == "error", read
    assert len(fallbacks) == 4


def test_a_compact_file_is_read_by_the_pass_and_a_raw_utf8_one_by_the_pair(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """Any layout of ASCII JSON is the pass's (each member has its ':'); raw UTF-8 text is
    left to the pair's reader, which reads or names it."""
    plan = strategies.random_plan(3)
    plan.other_keys = {"note": "modèle"}
    written = tmp_path / "written.json"
    shardplan.write_plan(plan, written)
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(written.read_bytes()), separators=(",", ":")))
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(json.loads(written.read_bytes()), ensure_ascii=False), "utf-8")
    for path in (written, compact, raw):
        read, pair = both(path)
        assert read == pair and read[0] == "plan"
    assert fallbacks == [raw]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('"ep_stack": {"n": NaN}', "not valid JSON"),
        ('"ep_stack": {"n": 1e400}', "overflows"),
        ('"ep_stack": {"n": 123456789012345678901234567890}', ""),
    ],
    ids=["nan", "1e400", "int-beyond-64-bits"],
)
def test_numbers_the_writer_refuses_are_refused_and_big_ints_read_exactly(
    tmp_path: Path, fallbacks: list[Path], text: str, fragment: str
) -> None:
    """NaN and 1e400 never reach the pass (its decoder refuses them, and the pair's reader
    names them); an int beyond 64 bits is read by the pass, exactly."""
    path = tmp_path / "codegen_meta.json"
    path.write_text(
        '{"injections": [{"match": "m", ' + text + '}], "param_plan": {"m": {}}, '
        '"frozen_sharded_params": []}\n'
    )
    read, pair = both(path)
    assert read == pair
    if fragment:
        assert read[0] == "error" and fragment in read[3]
        assert fallbacks == [path]
    else:
        assert read[0] == "plan" and fallbacks == []
        plan = shardplan.read_plan(path)
        assert plan.modules["m"]._ep_stack == {"n": 123456789012345678901234567890}


def test_a_failed_pass_leaves_nothing_half_converted_behind(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """A defect met after placement tables were parsed in place: the pair reads the file
    again from scratch, so its error is the one it names on its own."""
    path = _entry_file(tmp_path, '"params": {"w": {"tp": "S(0)"}}, "in_src": {"x": {"tp": "S(x)"}}')
    read, pair = both(path)
    assert read == pair and read[:3] == ("error", MetaError, 'param_plan["m"].in_src["x"]["tp"]')
    assert fallbacks == [path]


def test_the_entries_are_decoded_in_pieces_to_the_document_decode_counted_gives(
    tmp_path: Path,
) -> None:
    """The pass's document is decode_counted's, though its entries are cut into pieces (so
    the file's bytes go before the whole document is built); an entry key repeated in
    another piece is kept once, and the count says so."""
    from shardplan.artifact import jsoncodec

    path = tmp_path / "codegen_meta.json"
    plan = strategies.random_plan(7)
    plan.modules = {f"layers.{n}": spec for n in range(400) for spec in plan.modules.values()}
    shardplan.write_plan(plan, path)
    data = path.read_bytes()
    cut = jsoncodec.decode_counted_apart(data, "param_plan")
    assert cut is not None
    document, pieces, colons = cut
    assert len(pieces) > 8  # cut between entries, not decoded whole
    assert jsoncodec.decode_pieces(document, "param_plan", pieces) and pieces == []
    assert (document, colons) == jsoncodec.decode_counted(data)
    first = data.index(b'    "layers.0": {')
    entry = data[first : data.index(b"\n    },\n", first) + 8]
    end = data.index(b"\n  }", data.index(b'"param_plan"'))  # the entries' object closes
    repeated = data[:end] + b",\n" + entry.rstrip(b",\n") + data[end:]
    assert json.loads(repeated)  # still JSON: "layers.0" given twice, in pieces apart
    path.write_bytes(repeated)
    read, pair = both(path)
    assert read == pair and read[0] == "error" and "repeats the key 'layers.0'" in read[3]


@pytest.mark.parametrize(
    "later",
    [
        {},  # the entries are the last key
        {"remote_siblings": [], "signature": "s", "special_handlers": {}, "zz": None},
        # Objects of objects after the entries, as another producer's "source" is: their
        # members end as the entries' do, and the end is still the entries'.
        {"source": {"a": {"b": 1}, "c": {"d": [2]}}, "special_handlers": {"x": "y"}},
        {"source": {f"k{n}": {"v": n} for n in range(300)}, "tied": [["a", "b"]]},
    ],
)
def test_the_entries_end_is_found_from_the_file_end_past_any_later_member(
    tmp_path: Path, fallbacks: list[Path], later: dict[str, Any]
) -> None:
    """The entries' end is sought from the file's end, top-level member by member: every
    shape of member after them leaves the pass reading the file, agreeing with the pair."""
    plan = strategies.random_plan(5)
    plan.other_keys = dict(later)
    plan.special_handlers = plan.other_keys.pop("special_handlers", {})  # the plan's own key
    path = tmp_path / "codegen_meta.json"
    shardplan.write_plan(plan, path)
    read, pair = both(path)
    assert read == pair and read[0] == "plan"
    assert fallbacks == []


def test_a_later_member_longer_than_the_window_is_read_by_the_pair(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """A member after the entries longer than the window the end is sought in is taken for
    the entries' end: the piece holding it decodes to no object, and the pair reads the
    file (correct, not fast: no plan writes such a member)."""
    from shardplan.artifact import jsoncodec

    plan = strategies.random_plan(5)
    plan.other_keys = {"source": {f"k{n}": {"v": "x" * 64} for n in range(2_000)}}
    path = tmp_path / "codegen_meta.json"
    shardplan.write_plan(plan, path)
    source = path.read_bytes().split(b'\n  "source": {\n')[1].split(b'\n  "')[0]
    assert len(source) > jsoncodec._MEMBER_WINDOW
    read, pair = both(path)
    assert read == pair and read[0] == "plan"
    assert fallbacks == [path]


def test_an_entries_line_nested_elsewhere_is_not_cut_out_as_the_entries(
    tmp_path: Path, fallbacks: list[Path]
) -> None:
    """The entries are found by their canonical opening line; a file whose other key holds
    such a line (another layout can) is not read with that object as its entries: the rest
    of the file, decoded, must hold the random placeholder at its top level."""
    path = tmp_path / "codegen_meta.json"
    path.write_text(
        '{"injections": [], "other": {\n  "param_plan": {\n    "m": {}\n  }\n}, '
        '"param_plan": {}, "frozen_sharded_params": []}\n'
    )
    read, pair = both(path)
    assert read == pair and read[0] == "plan"
    assert shardplan.read_plan(path).modules == {}
    assert fallbacks == [path, path]


# Other top-level members, as another producer writes them: any JSON value under a key
# that sorts before or after the entries.
_OTHER_MEMBERS = st.dictionaries(
    st.sampled_from(["a", "injections", "param", "param_plan_", "parallel", "source", "zz"]),
    strategies.json_values,
    max_size=4,
)
_ENTRIES = st.dictionaries(
    st.sampled_from(["m", "m.a", "n", "x.y.z"]),
    st.dictionaries(st.sampled_from(["params", "out_names", "k"]), strategies.json_values),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(entries=_ENTRIES, others=_OTHER_MEMBERS)
def test_the_entries_cut_out_give_the_files_document_or_nothing(
    entries: dict[str, Any], others: dict[str, Any]
) -> None:
    """Whatever surrounds the entries in a canonical file, the counted tier gives exactly
    json.loads' document (pieces and all) or says nothing: never another document."""
    from shardplan.artifact import jsoncodec

    document = {**others, "param_plan": entries}
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    cut = jsoncodec.decode_counted_apart(data, "param_plan")
    if cut is None:
        return
    found, pieces, colons = cut
    if jsoncodec.decode_pieces(found, "param_plan", pieces):
        assert found == json.loads(data) and colons == data.count(b":")


def test_another_producers_artifact_is_read_by_the_pass(fallbacks: list[Path]) -> None:
    """The shared fixture (hyper-parallel's planner) holds objects of objects after the
    entries ("source"): the pass still finds the entries' end and reads the file, to the
    pair's plan."""
    from shardplan.examples.qwen3_moe_parallel import IMPLEMENTATIONS
    from tests.helpers import QWEN3_MOE, shared_fixture

    path = shared_fixture(QWEN3_MOE)
    read, pair = both(path, allow_targets=IMPLEMENTATIONS)
    assert read == pair and read[0] == "plan"
    assert fallbacks == []
