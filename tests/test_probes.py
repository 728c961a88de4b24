"""The runtime probes on tiny datasets written here: each asserts the figure the probe
must measure (slope ~1 for one leaked descriptor per sample, 2x for an unsharded
iterable on 2 workers, N/0 for an epoch-emptying dataset ...).

Every probe runs through ``run_isolated`` (a forked child, killed with its workers),
as ``dslint verify`` runs them.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")
import numpy as np  # noqa: E402
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, get_worker_info  # noqa: E402

from dslint.runtime import probes, worker_probes  # noqa: E402
from dslint.runtime.isolate import run_isolated  # noqa: E402

pytestmark = pytest.mark.slow


def isolated(fn, *args, limit=60, **kwargs):
    outcome = run_isolated(fn, args, kwargs, limit=limit)
    assert outcome.ok, f"{outcome.error}\n{outcome.traceback}\n{outcome.log_tail}"
    return outcome.value


# ----------------------------------------------------------------- datasets


def write_files(root: Path, n: int):
    paths = []
    for i in range(n):
        path = root / f"f{i}.bin"
        path.write_bytes(bytes([i % 256]) * 16)
        paths.append(path)
    return paths


class LeakOnePerSample(Dataset):
    """Keeps every opened file: exactly one more descriptor per sample."""

    def __init__(self, paths):
        self.paths = paths
        self.kept = []

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        handle = open(self.paths[i], "rb")  # noqa: DSL103 (intended: the bug under test)
        self.kept.append(handle)
        return i


class Closes(LeakOnePerSample):
    def __getitem__(self, i):
        with open(self.paths[i], "rb") as handle:
            return len(handle.read())


class DropsUnclosed(LeakOnePerSample):
    """Opens without closing and drops the handle: freed by refcounting, with a ResourceWarning."""

    def __getitem__(self, i):
        return len(open(self.paths[i], "rb").read())  # noqa: DSL104 (intended: the bug under test)


class Unsharded(IterableDataset):
    def __init__(self, n=40):
        self.n = n

    def __iter__(self):  # noqa: DSL303 (intended: the bug under test)
        return iter(range(self.n))


class Sharded(Unsharded):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


class ReturnsSelf(IterableDataset):
    def __init__(self, n=30):
        self.n = n
        self.i = 0

    def __iter__(self):  # noqa: DSL303 (intended: the bug under test)
        return self  # noqa: DSL301 (intended: the bug under test)

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class Generates(ReturnsSelf):
    def __iter__(self):
        yield from range(self.n)


class Sleeps(Dataset):
    def __init__(self, seconds, n=24):
        self.seconds, self.n = seconds, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.seconds:
            time.sleep(self.seconds)
        return i


class RngInInit(Dataset):
    def __init__(self, n=32):
        self.n = n
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return float(self.rng.uniform())


class RngPerWorker(RngInInit):
    def __init__(self, n=32):
        self.n = n
        self.rng = None

    def __getitem__(self, i):
        if self.rng is None:
            info = get_worker_info()
            self.rng = np.random.default_rng(info.seed if info else 0)
        return float(self.rng.uniform())


class EpochAware(Dataset):
    def __init__(self, n=16):
        self.n = n
        self.epoch = 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.epoch


class Records(Dataset):
    """Fixed-size records read with seek+read."""

    def __init__(self, path, n, lazy):
        self.path, self.n, self.lazy = path, n, lazy
        self.file = None if lazy else open(path, "rb")

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.file is None:
            self.file = open(self.path, "rb")
        self.file.seek(i * 8)
        return int.from_bytes(self.file.read(8), "little")


class Holder:
    def __init__(self, fn):
        self.fn = fn


class WithTransform(Dataset):
    def __init__(self, transform):
        self.transform = Holder(transform)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return self.transform.fn(i)


class Strings(Dataset):
    def __init__(self, n, as_numpy):
        paths = [f"images/train/{i // 1000:04d}/{i:08d}.jpg" for i in range(n)]
        self.paths = np.array(paths, dtype=np.bytes_) if as_numpy else paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return len(self.paths[i])


def shuffled(ds):
    return {"num_workers": 2, "batch_size": 1024, "shuffle": True}


# ----------------------------------------------------------------- descriptors


def test_one_leaked_descriptor_per_sample_has_a_slope_of_one(tmp_path):
    paths = write_files(tmp_path, 60)
    bad = isolated(probes.fd_growth, lambda: LeakOnePerSample(paths), {"num_workers": 2, "batch_size": 4})
    good = isolated(probes.fd_growth, lambda: Closes(paths), {"num_workers": 2, "batch_size": 4})
    assert 0.95 <= bad.data["slope"] <= 1.05, bad.text
    assert all(0.95 <= s <= 1.05 for s in bad.data["slopes"]), bad.data
    assert bad.data["num_workers"] == 2 and len(bad.data["workers"]) == 4  # 2 workers x 2 epochs
    assert abs(good.data["slope"]) < 0.1, good.text
    assert bad.symptom and not good.symptom
    assert "fd/sample per worker" in bad.text and "EMFILE" in bad.text


def test_resource_warnings_are_counted_in_the_workers(tmp_path):
    paths = write_files(tmp_path, 20)
    bad = isolated(probes.fd_growth, lambda: DropsUnclosed(paths), {"num_workers": 2, "batch_size": 4})
    good = isolated(probes.fd_growth, lambda: Closes(paths), {"num_workers": 2, "batch_size": 4})
    assert bad.data["resource_warnings"] == 40  # 20 samples x 2 epochs, one unclosed file each
    assert "unclosed file" in bad.data["resource_warning"]
    assert abs(bad.data["slope"]) < 0.1  # refcounting closes them: no growth, only warnings
    assert good.data["resource_warnings"] == 0


# ----------------------------------------------------------------- epochs and duplicates


def test_epoch_emptying_dataset_shows_n_then_zero():
    bad = isolated(probes.epoch_counts, lambda: ReturnsSelf(30), {"batch_size": 5}, epochs=3)
    good = isolated(probes.epoch_counts, lambda: Generates(30), {"batch_size": 5}, epochs=3)
    by_config = {c["config"]: c["counts"] for c in bad.data["configs"]}
    assert by_config["num_workers=0"] == [30, 0, 0]
    assert by_config["2 persistent workers"] == [60, 0, 0]  # each worker's copy once, then nothing
    assert bad.symptom and not good.symptom
    assert all(c["counts"][0] == c["counts"][-1] for c in good.data["configs"])


def test_unsharded_iterable_duplicates_twice_with_two_workers():
    bad = isolated(probes.duplicates, lambda: Unsharded(40), {"batch_size": 8})
    good = isolated(probes.duplicates, lambda: Sharded(40), {"batch_size": 8})
    assert bad.data["factor"] == pytest.approx(2.0)
    assert bad.data["workers"]["epochs"][0] == {"samples": 80, "distinct": 40, "max_copies": 2}
    assert bad.data["single"]["epochs"][0]["samples"] == 40
    assert good.data["factor"] == pytest.approx(1.0)
    assert bad.symptom and not good.symptom


# ----------------------------------------------------------------- timing


def test_per_sample_time_ratio_bad_against_good():
    bad = isolated(probes.sample_time, lambda: Sleeps(0.01), {"num_workers": 2, "batch_size": 4}, max_samples=16)
    good = isolated(probes.sample_time, lambda: Sleeps(0), {"num_workers": 2, "batch_size": 4}, max_samples=16)
    assert 0.009 <= bad.data["median_s"] < 0.05
    assert probes.ratio(bad, good) > 20


def test_throughput_sees_the_speedup_of_workers_on_an_io_bound_dataset():
    fig = isolated(probes.throughput, lambda: Sleeps(0.02, n=48), {"batch_size": 4}, worker_counts=(0, 2), epochs=1)
    rows = {r["config"]: r for r in fig.data["rows"]}
    assert set(rows) == {"num_workers=0", "2 persistent workers"}
    assert rows["2 persistent workers"]["rate"] > 1.3 * rows["num_workers=0"]["rate"]
    assert fig.symptom and fig.data["best"] == "2 persistent workers"


# ----------------------------------------------------------------- exceptions and pickling


def test_exception_at_construction_and_at_first_iter():
    def sampler_and_shuffle():
        data = torch.utils.data.TensorDataset(torch.arange(8.0))
        return DataLoader(data, sampler=RandomSampler(data), shuffle=True)  # noqa: DSL501 (intended: the bug under test)

    def timeout_without_workers():
        return DataLoader(torch.utils.data.TensorDataset(torch.arange(8.0)), timeout=5)  # noqa: DSL503 (intended: the bug under test)

    fig = isolated(probes.exception_at, sampler_and_shuffle)
    assert fig.data["exception"] == "ValueError: sampler option is mutually exclusive with shuffle"
    assert fig.data["stage"] == "construction"
    fig = isolated(probes.exception_at, timeout_without_workers)
    assert fig.data["exception"] == "AssertionError: _SingleProcessDataLoaderIter requires timeout == 0"
    assert fig.data["stage"] == "iteration"
    fig = isolated(probes.exception_at, lambda: DataLoader(torch.utils.data.TensorDataset(torch.arange(8.0)), batch_size=4))
    assert not fig.symptom and fig.data["batches"] == 4  # 2 batches x 2 epochs


def test_find_unpicklable_names_the_attribute_path():
    def make_local():
        def local(i):
            return i

        return local

    ds = WithTransform(make_local())
    path, error = worker_probes.find_unpicklable(ds, "dataset")
    assert path == "dataset.transform.fn"
    assert "Can't pickle local object" in error and "make_local.<locals>.local" in error
    assert worker_probes.find_unpicklable(WithTransform(abs), "dataset") is None


def test_pickling_under_spawn_fails_for_a_lambda_collate_fn():
    fig = isolated(worker_probes.pickling, lambda: DataLoader(Sleeps(0, n=8), batch_size=4, num_workers=2, collate_fn=lambda b: b))  # noqa: DSL506 (intended: the bug under test)
    assert fig.symptom
    assert fig.data["failures"][0]["path"] == "collate_fn"
    assert not fig.data["run"]["ok"] and "pickle" in fig.data["run"]["exception"].lower()


# ----------------------------------------------------------------- integrity


def test_integrity_flags_a_handle_opened_in_init(tmp_path):
    path = tmp_path / "records.bin"
    n = 256
    path.write_bytes(b"".join(i.to_bytes(8, "little") for i in range(n)))
    bad = isolated(worker_probes.integrity, lambda: Records(path, n, lazy=False), reads=4000)
    good = isolated(worker_probes.integrity, lambda: Records(path, n, lazy=True), reads=4000)
    # the race on the shared offset is timing-dependent; the handle and the pickling failure are not
    assert bad.data["handles_at_start"] == ["dataset.file (BufferedReader)"]
    assert bad.data["pickle"]["path"] == "dataset.file" and "cannot pickle" in bad.data["pickle"]["error"]
    assert bad.symptom
    assert good.data["wrong"] == 0 and good.data["errors"] == 0 and good.data["reads"] >= 2000
    assert good.data["handles_at_start"] == [] and good.data["pickle"]["ok"]
    assert not good.symptom


# ----------------------------------------------------------------- RNG, state, memory, loops


def test_rng_made_in_init_is_shared_across_workers_and_repeated_every_epoch():
    bad = isolated(worker_probes.rng_streams, lambda: RngInInit(32), {"num_workers": 2, "batch_size": 4})
    good = isolated(worker_probes.rng_streams, lambda: RngPerWorker(32), {"num_workers": 2, "batch_size": 4})
    source = next(s for s in bad.data["sources"] if s["source"] == "dataset.rng")
    assert source["shared"] == 32  # half of the 64 samples repeat the other worker's draw
    assert source["repeated"] == 32  # every epoch-2 state was seen in epoch 1
    assert bad.symptom
    assert all(s["shared"] == 0 and s["repeated"] == 0 for s in good.data["sources"])
    assert not good.symptom


def test_persistent_workers_keep_the_first_epochs_state():
    def loop(dataset, loader, epochs):
        for epoch in range(epochs):
            dataset.epoch = epoch
            for _ in loader:
                pass

    bad = isolated(worker_probes.worker_state, lambda: EpochAware(), {"num_workers": 2, "batch_size": 4, "persistent_workers": True},
                   epochs=3, loop=loop)
    good = isolated(worker_probes.worker_state, lambda: EpochAware(), {"num_workers": 2, "batch_size": 4}, epochs=3, loop=loop)
    assert bad.data["attrs"][0]["parent"] == ["0", "1", "2"]
    assert bad.data["attrs"][0]["workers"] == ["0", "0", "0"]
    assert good.data["attrs"][0]["workers"] == ["0", "1", "2"]
    assert bad.symptom and not good.symptom


def test_worker_memory_grows_for_a_list_of_str_not_for_numpy():
    n = 300_000
    bad = isolated(worker_probes.worker_memory, lambda: Strings(n, as_numpy=False), shuffled(None), epochs=1)
    good = isolated(worker_probes.worker_memory, lambda: Strings(n, as_numpy=True), shuffled(None), epochs=1)
    assert bad.data["growth_mib"] > 0.5 * bad.data["footprint_mib"] > 5, bad.text
    assert good.data["growth_mib"] < 0.25 * bad.data["growth_mib"], good.text
    assert bad.symptom and not good.symptom


def test_loop_cost_counts_worker_restarts_of_next_iter_per_step():
    def per_step():
        loader = DataLoader(Sleeps(0, n=64), batch_size=4, num_workers=2)
        for _ in range(5):
            next(iter(loader))  # noqa: DSL511 (intended: the bug under test)

    def one_iterator():
        loader = DataLoader(Sleeps(0, n=64), batch_size=4, num_workers=2)
        batches = iter(loader)
        for _ in range(5):
            next(batches)

    bad = isolated(probes.loop_cost, per_step)
    good = isolated(probes.loop_cost, one_iterator)
    assert bad.data["iterations"] == 5 and bad.data["distinct_starts"] == 1
    assert bad.data["worker_processes"] == 10  # 2 new workers per iter()
    assert good.data["iterations"] == 1 and good.data["worker_processes"] <= 2
    assert bad.symptom and not good.symptom


# ----------------------------------------------------------------- isolation


def _hang():
    loader = DataLoader(Sleeps(3600, n=8), batch_size=2, num_workers=2)
    for _ in loader:
        pass


def _kill_worker():
    class Dies(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            os.kill(os.getpid(), signal.SIGKILL)

    for _ in DataLoader(Dies(), batch_size=2, num_workers=2):  # noqa: DSL506 (intended: the bug under test)
        pass


def test_a_hanging_dataset_is_killed_with_its_workers():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    outcome = run_isolated(_hang, limit=4)
    assert time.monotonic() - start < 15
    assert not outcome.ok and outcome.kind == "timeout" and "timed out after" in outcome.error
    time.sleep(0.2)
    after = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not after, f"leftover processes: {after}"


def test_a_crashing_worker_gives_an_error_not_a_crash():
    outcome = run_isolated(_kill_worker, limit=30)
    assert not outcome.ok and outcome.kind == "raised"
    # torch words it after which of its checks sees the dead worker first
    assert "DataLoader worker" in outcome.error
    assert "killed by signal" in outcome.error or "exited unexpectedly" in outcome.error


def test_a_dying_probe_process_is_reported():
    outcome = run_isolated(os._exit, (3,), limit=10)
    assert not outcome.ok and outcome.kind == "died" and "exit code 3" in outcome.error


def test_digest_is_content_based():
    from dslint.runtime.snapshots import digest

    assert digest(torch.tensor([1, 2])) == digest(torch.tensor([1, 2]))
    assert digest(torch.tensor([1, 2])) != digest(torch.tensor([1, 3]))
    assert digest({"a": np.arange(3), "b": [1, "x"]}) == digest({"b": [1, "x"], "a": np.arange(3)})
    assert digest(torch.tensor([1.0], dtype=torch.bfloat16)) != digest(torch.tensor([2.0], dtype=torch.bfloat16))
