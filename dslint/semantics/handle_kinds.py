"""The kinds of handle the handle rules know, by the qualified name of the call that opens one."""

from __future__ import annotations

# Library handles (the object holds its file, or a native handle, until closed), by opener and kind.
# ``bench/handle_fork.py`` measured each on torch 2.13: none of them pickles, so a dataset that keeps
# one cannot reach spawn/forkserver workers, and forked workers reading through the parent's handle
# got other records' values from some (LIBRARY_FORK_WRONG). xarray's datasets are left out: they
# pickle (reopening the file) and forked reads came back right.
LIBRARY_HANDLES = {
    "tifffile.TiffFile": "tiff",
    "soundfile.SoundFile": "sound",
    "rasterio.open": "raster",
    "netCDF4.Dataset": "netcdf",
    "h5netcdf.File": "netcdf",
    "tables.open_file": "pytables",
    "pandas.HDFStore": "pytables",
    "openslide.OpenSlide": "slide",
}
# The error pickling each kind raised (what a spawn/forkserver worker start raises).
LIBRARY_PICKLE_ERRORS = {
    "tiff": "TypeError: cannot pickle '_io.BufferedReader' object",
    "sound": "TypeError: cannot pickle '_cffi_backend.__CDataOwn' object",
    "raster": "TypeError: self._hds cannot be converted to a Python object for pickling",
    "netcdf": "NotImplementedError: Dataset is not picklable",
    "pytables": "AttributeError: Can't pickle local object 'WeakValueDictionary.__init__.<locals>.remove'",
    "slide": "ValueError: ctypes objects containing pointers cannot be pickled",
}
# The kinds whose forked reads came back wrong in that measurement: what it showed.
LIBRARY_FORK_WRONG = {  # three runs, 4 forked workers, 8,000 reads each
    "tiff": "measured with 4 workers: 39 to 205 of 8,000 reads wrong, 434 to 620 failed with `IndexError`",
    "sound": "measured with 4 workers: 37 to 3,289 of 8,000 reads wrong",
    "raster": "measured with 4 workers: 7 to 10 of 8,000 reads wrong",
}

HANDLE_KINDS = {
    **dict.fromkeys(
        ("builtins.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open", "gzip.GzipFile", "bz2.BZ2File"),
        "file",
    ),
    **dict.fromkeys(("lzma.LZMAFile", "io.FileIO", "os.fdopen"), "file"),
    **dict.fromkeys(("tarfile.open", "tarfile.TarFile", "tarfile.TarFile.open"), "tar"),
    "zipfile.ZipFile": "zip",
    "h5py.File": "h5py",
    **dict.fromkeys(("lmdb.open", "lmdb.Environment"), "lmdb"),
    "sqlite3.connect": "sqlite",
    "PIL.Image.open": "image",
    **dict.fromkeys(("socket.socket", "socket.create_connection"), "socket"),
    **dict.fromkeys(("psycopg2.connect", "psycopg.connect", "pymysql.connect", "MySQLdb.connect"), "db"),
    **dict.fromkeys(("mysql.connector.connect", "pymongo.MongoClient"), "db"),
    **dict.fromkeys(("requests.Session", "requests.session", "httpx.Client", "urllib3.PoolManager"), "session"),
    **LIBRARY_HANDLES,
}
# How a handle of each kind is kept through a derived object (methods, key subscripts).
HANDLE_DERIVATIONS = {
    "h5py": (("get",), True),
    "lmdb": (("begin",), False),
    "sqlite": (("cursor",), False),
    "db": (("cursor",), False),
    "zip": (("open",), False),
    "tar": (("extractfile",), False),
}
