"""`dslint probe TARGET` on small datasets written here, in a user's own file.

Each run goes through the real command (in-process through click, whose checks fork
real DataLoader workers; one run through a subprocess, as a user runs it) and asserts
the reported codes and figures: a leaky dataset keeps ~1 descriptor per sample
(DSL103), an unsharded iterable delivers every sample twice with 2 workers (DSL303),
an iterator that returns itself gives N then 0 samples (DSL301), a clean dataset has
no finding and exit 0; a crashing or hanging dataset exits 2 with one clear line,
within its time limit, and leaves no process behind.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO, run_cli

pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")
from click.testing import CliRunner  # noqa: E402

from dslint.cli import main  # noqa: E402

pytestmark = pytest.mark.slow

DATASETS = '''
import time
from pathlib import Path

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


def write_files(root, n):
    paths = []
    for i in range(n):
        path = Path(root) / f"f{i}.bin"
        path.write_bytes(bytes([i % 256]) * 16)
        paths.append(path)
    return paths


class LeakyFiles(Dataset):
    """Keeps every file it opens: one more descriptor per sample."""

    def __init__(self, root, n=60):
        self.paths = write_files(root, n)
        self.kept = []

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        handle = open(self.paths[i], "rb")
        self.kept.append(handle)
        return torch.tensor(i)


class CleanFiles(LeakyFiles):
    def __getitem__(self, i):
        with open(self.paths[i], "rb") as handle:
            return torch.tensor(len(handle.read()) + i)


class Unsharded(IterableDataset):
    """Every worker replays the whole stream."""

    def __init__(self, n=40):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class ReturnsSelf(IterableDataset):
    """Its own iterator, sharded by worker: the second epoch finds it exhausted."""

    def __init__(self, n=30):
        self.n = n
        self.i = 0
        self.step = None

    def __iter__(self):
        return self

    def __next__(self):
        if self.step is None:
            info = get_worker_info()
            self.i, self.step = (0, 1) if info is None else (info.id, info.num_workers)
        if self.i >= self.n:
            raise StopIteration
        value = self.i
        self.i += self.step
        return torch.tensor(value)


class Crashes(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return 1 / 0


class HangsInWorkers(Dataset):
    """Fine in the main process; every worker hangs on its first sample."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if get_worker_info() is not None:
            time.sleep(3600)
        return i


def needs_size(size):
    return Unsharded(size)


class HoldsFile(Dataset):
    """An open file in __init__: does not pickle, but that is DSL401's handle, not DSL506."""

    def __init__(self, root):
        path = Path(root) / "records.bin"
        path.write_bytes(bytes(range(64)))
        self.file = open(path, "rb")

    def __len__(self):
        return 16

    def __getitem__(self, i):
        self.file.seek(i)
        return torch.tensor(self.file.read(1)[0])


class SameValue(IterableDataset):
    """Sharded by worker; every sample is the same tensor (identical content, no duplicates)."""

    def __init__(self, n=40):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        for i in range(self.n):
            if info is None or i % info.num_workers == info.id:
                yield torch.zeros(3)


class SameValueUnsharded(SameValue):
    """Every worker replays the stream: duplicates, and identical content too."""

    def __iter__(self):
        for i in range(self.n):
            yield torch.zeros(3)
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "userdata.py"
    path.write_text(textwrap.dedent(DATASETS).lstrip())
    return path


def probe(*args: str):
    return CliRunner().invoke(main, ["probe", *args], catch_exceptions=False)


def probe_json(*args: str):
    result = probe(*args, "--output-format", "json")
    return result, json.loads(result.stdout)


def checks(report: dict) -> dict:
    return {c["check"]: c for c in report["checks"]}


def codes(report: dict) -> list:
    return sorted(f["code"] for f in report["findings"])


def test_leaky_dataset_keeps_one_descriptor_per_sample(user_file):
    result, report = probe_json(f"{user_file}:LeakyFiles")
    assert result.exit_code == 1, result.output
    assert codes(report) == ["DSL103"]
    fd = checks(report)["descriptors"]
    assert 0.95 <= fd["data"]["slope"] <= 1.05, fd
    assert all(0.95 <= s <= 1.05 for s in fd["data"]["slopes"]), fd["data"]
    assert fd["result"] == "DSL103 confirmed at runtime"
    finding = report["findings"][0]
    assert finding["name"] == "retained-file-handles"
    assert "Too many open files" in finding["message"] and "1.00 more open descriptor per sample" in finding["message"]
    assert report["summary"] == "1 problem confirmed"
    # the factory's `root` got a temporary directory; the other checks found nothing
    assert report["target"]["call"] == "LeakyFiles(root=<a temporary directory>)"
    assert report["target"]["length"] == 60
    assert {c["result"] for n, c in checks(report).items() if n != "descriptors"} <= {"ok", "n/a"}


def test_unsharded_iterable_delivers_every_sample_once_per_worker(user_file):
    result, report = probe_json(f"{user_file}:Unsharded", "--select", "DSL3")
    assert result.exit_code == 1, result.output
    assert codes(report) == ["DSL303"]
    data = checks(report)["duplicates"]["data"]
    assert data["factor"] == pytest.approx(2.0)
    assert data["workers"]["epochs"][0] == {"samples": 80, "distinct": 40, "max_copies": 2}
    assert data["single"]["epochs"][0]["samples"] == 40
    assert checks(report)["epochs"]["result"] == "ok"  # a fresh iterator every epoch
    assert "every sample arrives 2.0 times per epoch" in report["findings"][0]["message"]


def test_iterator_returning_itself_empties_the_second_epoch(user_file):
    result, report = probe_json(f"{user_file}:ReturnsSelf", "--select", "DSL3")
    assert result.exit_code == 1, result.output
    assert codes(report) == ["DSL301"]  # sharded: no DSL303
    configs = {c["config"]: c["counts"] for c in checks(report)["epochs"]["data"]["configs"]}
    assert configs["num_workers=0"] == [30, 0]
    assert configs["2 persistent workers"] == [30, 0]
    assert "__iter__ returns the dataset itself" in report["findings"][0]["message"]


def test_clean_dataset_has_no_finding(user_file):
    result = probe(f"{user_file}:CleanFiles", "--kwargs", '{"n": 40}')
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"dslint probe {user_file}:CleanFiles\n")
    assert "target: CleanFiles(n=40, root=<a temporary directory>)" in out
    assert "| check | codes | measured | result |" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    assert len(rows) == 8 and all(line.endswith("| ok |") or line.endswith("| n/a |") for line in rows), out
    assert "confirmed at runtime" not in out
    assert out.rstrip().endswith("no runtime problems found")


def test_a_crashing_dataset_gives_one_line_and_exit_2(user_file):
    result = probe(f"{user_file}:Crashes")
    assert result.exit_code == 2
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"dslint: error: probe {user_file}:Crashes: dataset[0] raised ZeroDivisionError: division by zero")
    assert "userdata.py:" in line and "in __getitem__" in line


def test_a_dataset_hanging_in_its_workers_is_killed_at_the_timeout(user_file):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    result = probe(f"{user_file}:HangsInWorkers", "--select", "DSL103", "--timeout", "3")
    assert time.monotonic() - start < 30
    assert result.exit_code == 2, result.output
    assert "error: timed out after 3 s in descriptors per sample" in result.stdout
    assert "the dataset hangs or is too slow; its workers were killed" in result.stderr
    assert "Traceback" not in result.output
    time.sleep(0.3)
    assert not {p.pid for p in psutil.Process().children(recursive=True)} - before


@pytest.mark.parametrize("args, message", [
    (["nocolon"], "TARGET must be module:attr or path/to/file.py:attr"),
    (["missing.py:build"], "no such file: missing.py"),
    (["{file}:Nope"], "has no attribute 'Nope'"),
    (["{file}:needs_size"], "needs_size needs the argument 'size': give it with --kwargs"),
    (["{file}:needs_size", "--kwargs", "[1]"], "--kwargs must be a JSON object"),
])
def test_target_errors_exit_2_with_one_line(user_file, args, message):
    result = probe(*[a.format(file=user_file) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr


def test_factory_kwargs_are_passed(user_file):
    result, report = probe_json(f"{user_file}:needs_size", "--kwargs", '{"size": 12}', "--select", "DSL303")
    assert result.exit_code == 1, result.output
    assert report["target"]["call"] == "needs_size(size=12)" and report["target"]["length"] is None
    assert checks(report)["duplicates"]["data"]["workers"]["epochs"][0]["samples"] == 24


def test_probe_a_fixture_factory_through_the_real_cli():
    run = run_cli("probe", str(FIXTURES / "DSL103-retained-file-handles" / "bad.py") + ":build", "--select", "DSL103",
                  cwd=REPO, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "target: build(root=<a temporary directory>) \u2192 CachedImages, a map-style Dataset of 200 samples" in run.stdout
    assert "DSL103 retained-file-handles: confirmed at runtime" in run.stdout
    assert run.stdout.rstrip().endswith("1 problem confirmed")


@pytest.mark.parametrize("code", ["DSL101", "DSL102", "DSL104"])
def test_resource_warnings_are_labelled_by_what_stays_open(code):
    """The split by consequence, measured: an image file that warns (multi-frame GIFs) is DSL101's,
    a handle kept by the dataset between samples DSL102's, a file object dropped with its sample
    (only a ResourceWarning) the opt-in DSL104's."""
    bad = next(FIXTURES.glob(f"{code}-*")) / "bad.py"
    result, report = probe_json(f"{bad}:build", "--select", "DSL1")
    assert result.exit_code == 1, result.output
    assert codes(report) == [code], report["findings"]
    assert checks(report)["descriptors"]["data"]["resource_warnings"] > 0
    good = bad.with_name("good.py")
    result, report = probe_json(f"{good}:build", "--select", "DSL1")
    assert result.exit_code == 0 and codes(report) == [], report["findings"]


# ------------------------------------------------------------------ the gate never lies


@pytest.mark.parametrize("args, message", [
    (["--select", "DSL999"], "--select: unknown rule selector `DSL999`"),
    (["--select", "DSL103,nonsense"], "--select: unknown rule selector `nonsense`"),
    (["--ignore", "DSL9"], "--ignore: unknown rule selector `DSL9`"),
    (["--select", "DSL001"], "--select/--ignore leave no check to run (probe confirms DSL101, "),
    (["--select", "DSL1", "--ignore", "DSL10"], "--select/--ignore leave no check to run"),
])
def test_an_unknown_or_empty_selection_exits_2_as_check_does(user_file, args, message):
    run = run_cli("probe", f"{user_file}:CleanFiles", *args, cwd=REPO, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "" and run.stderr.strip() == run.stderr.strip().splitlines()[0], run.stderr
    assert run.stderr.startswith("dslint: error: ") and message in run.stderr, run.stderr
    if "unknown" in message:  # the very line `dslint check` prints for the same selector
        selector = message.split("`")[1]
        flag = message.split(":")[0]
        check = run_cli("check", flag, selector, "--no-cache", str(user_file), cwd=REPO)
        assert check.returncode == 2 and check.stderr == run.stderr, (check.stderr, run.stderr)


def test_ignore_drops_a_code_a_selected_check_confirms(user_file):
    # the descriptors check still runs for DSL101/DSL102; what it measured for DSL103 is not reported
    result, report = probe_json(f"{user_file}:LeakyFiles", "--select", "DSL1", "--ignore", "retained-file-handles")
    assert result.exit_code == 0, result.output
    assert codes(report) == [] and list(checks(report)) == ["descriptors"]
    assert checks(report)["descriptors"]["result"] == "DSL103 measured, not selected"
    # a rule name selects as in `dslint check`
    result, report = probe_json(f"{user_file}:LeakyFiles", "--select", "retained-file-handles")
    assert result.exit_code == 1 and codes(report) == ["DSL103"], result.output


def test_pickling_is_never_ok_beside_a_pickling_error(user_file):
    result, report = probe_json(f"{user_file}:HoldsFile", "--select", "DSL506")
    assert result.exit_code == 0, result.output
    row = checks(report)["pickling"]
    assert "TypeError: cannot pickle '_io.BufferedReader' object at dataset.file" in row["measured"]
    assert row["result"] == "not DSL506: an open handle (see DSL401, DSL302)", row
    assert codes(report) == []


def test_identical_content_is_not_duplication(user_file):
    result, report = probe_json(f"{user_file}:SameValue", "--select", "DSL303")
    assert result.exit_code == 0, result.output
    row = checks(report)["duplicates"]
    assert row["result"] == "ok" and row["data"]["factor"] == pytest.approx(1.0), row
    assert "39 of the 40 samples with num_workers=0 repeat another's content (identical values, not duplicates)" \
        in row["measured"], row["measured"]
    assert "(40.0x)" not in row["measured"]


def test_duplicates_with_identical_content_are_counted_by_identity(user_file):
    result, report = probe_json(f"{user_file}:SameValueUnsharded", "--select", "DSL303")
    assert result.exit_code == 1, result.output
    assert checks(report)["duplicates"]["data"]["factor"] == pytest.approx(2.0)
    message = report["findings"][0]["message"]
    assert message.startswith("with 2 workers every sample arrives 2.0 times per epoch "
                              "(80 samples per epoch where num_workers=0 delivers 40)"), message


def test_a_cut_stream_of_identical_content_is_undecided_not_ok(user_file):
    """--samples 8 cuts the 40-sample stream: the count says nothing, and equal values say nothing."""
    result, report = probe_json(f"{user_file}:SameValueUnsharded", "--select", "DSL303", "--samples", "8")
    assert result.exit_code == 0, result.output
    row = checks(report)["duplicates"]
    assert row["result"] == "cannot tell: identical content in a stream cut at --samples", row
    assert report["summary"] == "no runtime problems found; 1 check could not decide (duplicates)"
    # the same cut, samples that differ: each worker's k-th sample is the stream's k-th
    result, report = probe_json(f"{user_file}:Unsharded", "--select", "DSL303", "--samples", "8")
    assert result.exit_code == 1, result.output
    assert checks(report)["duplicates"]["data"]["basis"] == "order"
    assert "each worker delivers the stream's samples in the same order from its start" in report["findings"][0]["message"]
