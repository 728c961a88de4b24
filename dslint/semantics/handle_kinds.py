"""The kinds of handle the handle rules know, by the qualified name of the call that opens one."""

from __future__ import annotations

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
