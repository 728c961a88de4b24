"""Which library handles still hold their file after the program drops them?

DSL102 reports a per-sample handle that is never closed only when dropping it does not
release the file. This script measures that for each opener it knows, with whatever of
those libraries is installed: it writes ``--files`` small files, then opens, reads and
drops each one in one statement (``opener(path).read()``, the shape dataset code uses),
and counts this process's open descriptors (``/proc/self/fd``) before, after the loop,
and after ``gc.collect()``::

    python bench/handle_release.py [--files 300]

A library whose count grows with the number of files keeps its files until ``close()``;
one that stays flat releases them when the object is freed. Linux only.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import tempfile
import warnings


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rasterio(folder, count):
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.tif")
        with rasterio.open(path, "w", driver="GTiff", height=4, width=4, count=1, dtype="uint8",
                           transform=from_origin(0, 0, 1, 1)) as out:
            out.write(np.zeros((1, 4, 4), dtype="uint8"))
        paths.append(path)
    return paths, lambda p: rasterio.open(p).read()


def _netcdf(folder, count, reader):
    import netCDF4
    import numpy as np

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.nc")
        with netCDF4.Dataset(path, "w") as out:
            out.createDimension("x", 4)
            out.createVariable("v", "f4", ("x",))[:] = np.arange(4)
        paths.append(path)
    return paths, reader


def _netcdf4(folder, count):
    import netCDF4

    return _netcdf(folder, count, lambda p: netCDF4.Dataset(p)["v"][:])


def _xarray(folder, count):
    import xarray

    return _netcdf(folder, count, lambda p: xarray.open_dataset(p)["v"].values)


def _h5py(folder, count):
    import h5py
    import numpy as np

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.h5")
        with h5py.File(path, "w") as out:
            out["v"] = np.arange(4)
        paths.append(path)
    return paths, lambda p: h5py.File(p, "r")["v"][()]


def _tables(folder, count):
    import numpy as np
    import tables

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.hdf")
        with tables.open_file(path, "w") as out:
            out.create_array("/", "v", np.arange(4))
        paths.append(path)
    return paths, lambda p: tables.open_file(p).root.v[:]


def _hdfstore(folder, count):
    import numpy as np
    import pandas

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.h5")
        pandas.DataFrame({"a": np.arange(3)}).to_hdf(path, key="df")
        paths.append(path)
    return paths, lambda p: pandas.HDFStore(p, mode="r")["df"]


def _lmdb(folder, count):
    import lmdb

    paths = []
    for i in range(count):
        path = os.path.join(folder, f"{i}.lmdb")
        env = lmdb.open(path, map_size=1 << 16)
        with env.begin(write=True) as txn:
            txn.put(b"k", b"v")
        env.close()
        paths.append(path)
    return paths, lambda p: lmdb.open(p, readonly=True, lock=False).begin().get(b"k")


#: (what the loop runs, the module whose version is shown, how to make the files and the reader)
CASES = (
    ("rasterio.open(p).read()", "rasterio", _rasterio),
    ('netCDF4.Dataset(p)["v"][:]', "netCDF4", _netcdf4),
    ('xarray.open_dataset(p)["v"].values', "xarray", _xarray),
    ('h5py.File(p, "r")["v"][()]', "h5py", _h5py),
    ("tables.open_file(p).root.v[:]", "tables", _tables),
    ('pandas.HDFStore(p, mode="r")["df"]', "pandas", _hdfstore),
    ('lmdb.open(p, readonly=True, lock=False).begin().get(k)', "lmdb", _lmdb),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300, help="distinct files opened per library [300]")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # PyTables warns about the files it still holds at exit
    print(f"| opened, read and dropped ({args.files} files) | version | still open after the loop | after gc.collect() |")
    print("|---|---|---:|---:|")
    for shown, module, make in CASES:
        try:
            version = importlib.import_module(module).__version__
        except ImportError:
            print(f"| `{shown}` | not installed | | |")
            continue
        with tempfile.TemporaryDirectory() as folder:
            paths, read = make(folder, args.files)
            gc.collect()
            before = open_descriptors()
            for path in paths:
                read(path)
            after = open_descriptors() - before
            gc.collect()
            collected = open_descriptors() - before
        print(f"| `{shown}` | {version} | {after} | {collected} |")


if __name__ == "__main__":
    main()
