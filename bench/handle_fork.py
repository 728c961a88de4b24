"""What happens to a library handle that a dataset opens before the DataLoader forks?

DSL401 reports a handle that a dataset's ``__init__`` opens and keeps for its per-sample
reads. For file objects, archives, h5py and LMDB the consequence is documented and measured
(see the rule's page). This script measures it for the library handles of
``dslint.semantics.handle_kinds.LIBRARY_HANDLES`` and for ``np.load`` of an ``.npz`` archive,
with whatever of those libraries is installed::

    python bench/handle_fork.py [--records 400] [--epochs 3] [--workers 2]

For each library it writes a small file of ``--records`` records, each filled with its own
index, opens it once in the parent, and builds a dataset whose ``__getitem__`` reads record
``i`` through that one handle. Then:

- *fork*: a real ``DataLoader`` with ``--workers`` forked workers reads every record in a
  shuffled order for ``--epochs`` epochs; a record that comes back with another record's
  values is *wrong*, one whose read raises is *failed* (the error is kept, not raised, so the
  run goes on). The parent reads the file through the same handle between epochs, as a
  validation pass would.
- *spawn*: ``pickle.dumps`` of the dataset, which is what a spawn or forkserver worker
  receives: either "pickles" or the exception it raises.

Linux only (fork). Each library is measured in a fresh child process, so one library's crash
is reported as such and does not stop the others.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import tempfile
import traceback

import numpy as np

SIDE = 16  # a record is SIDE x SIDE values


# ----------------------------------------------------------------------------- writers
# Each returns (open_in_parent, read_record(handle, i)) for a file of `n` records.


def _tifffile(folder, n):
    import tifffile

    path = os.path.join(folder, "pages.tif")
    with tifffile.TiffWriter(path) as out:
        for i in range(n):
            out.write(np.full((SIDE, SIDE), i, dtype="uint16"), contiguous=False)
    return (lambda: tifffile.TiffFile(path)), (lambda h, i: h.pages[i].asarray())


def _soundfile(folder, n):
    import soundfile

    path = os.path.join(folder, "samples.wav")
    soundfile.write(path, np.repeat(np.arange(n, dtype="int16"), SIDE * SIDE), 8000, subtype="PCM_16")

    def read(h, i):
        h.seek(i * SIDE * SIDE)
        return h.read(SIDE * SIDE, dtype="int16")

    return (lambda: soundfile.SoundFile(path)), read


def _rasterio(folder, n):
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    path = os.path.join(folder, "rows.tif")
    data = np.repeat(np.arange(n, dtype="uint16"), SIDE)[:, None].repeat(SIDE, axis=1)
    with rasterio.open(path, "w", driver="GTiff", height=n * SIDE, width=SIDE, count=1, dtype="uint16",
                       transform=from_origin(0, 0, 1, 1)) as out:
        out.write(data[None])
    return (lambda: rasterio.open(path)), (lambda h, i: h.read(1, window=Window(0, i * SIDE, SIDE, SIDE)))


def _netcdf(folder, n):
    import netCDF4

    path = os.path.join(folder, "records.nc")
    with netCDF4.Dataset(path, "w") as out:
        out.createDimension("n", n)
        out.createDimension("x", SIDE * SIDE)
        out.createVariable("v", "i4", ("n", "x"))[:] = np.repeat(np.arange(n), SIDE * SIDE).reshape(n, -1)
    return path


def _netcdf4(folder, n):
    import netCDF4

    path = _netcdf(folder, n)
    return (lambda: netCDF4.Dataset(path)), (lambda h, i: h.variables["v"][i])


def _xarray(folder, n):
    import xarray

    path = _netcdf(folder, n)
    return (lambda: xarray.open_dataset(path)), (lambda h, i: h["v"][i].values)


def _h5netcdf(folder, n):
    import h5netcdf

    path = _netcdf(folder, n)
    return (lambda: h5netcdf.File(path, "r")), (lambda h, i: h.variables["v"][i])


def _tables(folder, n):
    import tables

    path = os.path.join(folder, "records.h5")
    with tables.open_file(path, "w") as out:
        out.create_array("/", "v", np.repeat(np.arange(n), SIDE * SIDE).reshape(n, -1))
    return (lambda: tables.open_file(path)), (lambda h, i: h.root.v[i])


def _hdfstore(folder, n):
    import pandas

    path = os.path.join(folder, "records.h5")
    frame = pandas.DataFrame({"v": np.repeat(np.arange(n), SIDE)})
    frame.to_hdf(path, key="records", format="table")
    return (lambda: pandas.HDFStore(path, "r")), (lambda h, i: h.select("records", start=i * SIDE, stop=(i + 1) * SIDE)["v"].to_numpy())


def _openslide(folder, n):
    import openslide
    import tifffile

    tile = 256
    side = int(np.ceil(np.sqrt(n)))
    image = np.zeros((side * tile, side * tile, 3), dtype="uint8")
    for i in range(n):
        y, x = divmod(i, side)
        image[y * tile:(y + 1) * tile, x * tile:(x + 1) * tile] = i % 256
    path = os.path.join(folder, "slide.tif")
    tifffile.imwrite(path, image, tile=(tile, tile), photometric="rgb")  # a generic tiled TIFF

    def read(h, i):
        y, x = divmod(i, side)
        return np.asarray(h.read_region((x * tile + 64, y * tile + 64), 0, (128, 128)))[..., 0]

    return (lambda: openslide.OpenSlide(path)), read


def _npz(folder, n):
    path = os.path.join(folder, "records.npz")
    np.savez(path, **{f"arr_{i}": np.full((SIDE, SIDE), i, dtype="int32") for i in range(n)})
    # ``mmap_mode`` does not apply to archives: the result is an ``NpzFile`` over the open zip file
    return (lambda: np.load(path, mmap_mode="r")), (lambda h, i: h[f"arr_{i}"])


# the value a record's read gives when it is right (record i holds i, or i modulo 256 in 8-bit slides)
EXPECTED = {"openslide.OpenSlide": lambda i: i % 256}

LIBRARIES = {
    "tifffile.TiffFile": _tifffile,
    "soundfile.SoundFile": _soundfile,
    "rasterio.open": _rasterio,
    "netCDF4.Dataset": _netcdf4,
    "xarray.open_dataset": _xarray,
    "h5netcdf.File": _h5netcdf,
    "tables.open_file": _tables,
    "pandas.HDFStore": _hdfstore,
    "openslide.OpenSlide": _openslide,
    "numpy.load (.npz)": _npz,
}


# ----------------------------------------------------------------------------- measurement


class Records:
    """A dataset that keeps one handle opened before the fork and reads record ``i`` per sample."""

    def __init__(self, handle, read, n, expect):
        self.handle, self.read, self.n, self.expect = handle, read, n, expect

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        try:
            values = np.asarray(self.read(self.handle, i)).astype("int64").ravel()
        except Exception as error:  # kept, so that one bad read does not stop the epoch
            return i, -1, f"{type(error).__name__}: {error}"[:160]
        return i, int(bool(values.size) and np.all(values == self.expect(i))), ""


def _collate(batch):
    return batch


def measure(name, records, epochs, workers, queue):
    import torch.utils.data as tud

    result = {"library": name}
    try:
        with tempfile.TemporaryDirectory() as folder:
            opener, read = LIBRARIES[name](folder, records)
            handle = opener()
            dataset = Records(handle, read, records, EXPECTED.get(name, int))
            try:
                pickle.dumps(handle)  # what a spawned worker needs of the dataset
                result["spawn"] = "pickles"
            except Exception as error:
                result["spawn"] = f"{type(error).__name__}: {str(error)[:120]}"
            wrong = failed = 0
            errors = set()
            for _ in range(epochs):
                loader = tud.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=workers,
                                        collate_fn=_collate, multiprocessing_context="fork")
                for batch in loader:
                    for _, ok, error in batch:
                        wrong += ok == 0
                        failed += ok == -1
                        if error:
                            errors.add(error)
                for i in range(0, records, 7):  # the parent reads through the handle between epochs
                    dataset[i]
            result.update(reads=epochs * records, wrong=wrong, failed=failed, errors=sorted(errors)[:2])
    except ImportError as error:
        result["skipped"] = f"not installed ({error.name})"
    except Exception:
        result["crashed"] = traceback.format_exc(limit=2)[-400:]
    queue.put(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per library")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, {args.workers} forked workers, {args.records} records x {args.epochs} epochs")
    print("| opener | fork: wrong / failed of reads | first errors | spawn/forkserver |")
    print("|---|---|---|---|")
    context = mp.get_context("fork")
    for name in LIBRARIES:
        queue = context.Queue()
        child = context.Process(target=measure, args=(name, args.records, args.epochs, args.workers, queue))
        child.start()
        child.join(args.timeout)
        if child.is_alive():
            child.kill()
            print(f"| `{name}` | hung (killed after {args.timeout:.0f} s) | | |")
            continue
        if queue.empty():
            print(f"| `{name}` | the measuring process died (exit code {child.exitcode}) | | |")
            continue
        r = queue.get()
        if "skipped" in r or "crashed" in r:
            print(f"| `{name}` | {r.get('skipped') or r['crashed']!r} | | |")
            continue
        errors = "; ".join(f"`{e}`" for e in r["errors"])
        print(f"| `{name}` | {r['wrong']} wrong, {r['failed']} failed of {r['reads']} | {errors} | {r['spawn']} |")


if __name__ == "__main__":
    main()
