"""Storage that cannot keep the promise is refused: URL forms, mountinfo parsing, the WAL
check on a real connection whose VFS has no shared memory, quick_check on real files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from hookline.shared.config import Config
from hookline.shared.db_url import StorageRefused, sqlite_path
from hookline.shared.errors import ConfigError
from hookline.shared.store import open_store
from hookline.shared.store.checks import (
    check_journal_mode,
    enable_wal,
    mount_of,
    parse_mountinfo,
    quick_check,
    refuse_network_filesystem,
    unsafe_filesystem,
)
from hookline.shared.store.sqlite import SqliteStore

# Real /proc/self/mountinfo lines (proc(5) format), from a host with NFS, sshfs, virtiofs,
# a bindfs mount and a mount point with a space (escaped as \040).
MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683652k
60 27 0:52 / /srv/nfs rw,relatime shared:40 - nfs4 fs1:/export rw,vers=4.2,rsize=1048576
61 60 8:17 / /srv/nfs/local rw,relatime shared:41 - ext4 /dev/sdb1 rw
62 27 0:53 / /home/me/remote rw,nosuid,nodev,relatime - fuse.sshfs me@box:/data rw,user_id=0
63 27 0:54 / /mnt/host rw,relatime - virtiofs hostshare rw
64 27 0:39 / /tmp/bound rw,nosuid,nodev,relatime - fuse /tmp/src rw,user_id=0,group_id=0
65 27 0:40 / /mnt/my\\040disk rw,relatime - cifs //nas/share rw,vers=3.1.1
"""


@pytest.mark.parametrize("url", [":memory:", "sqlite:///:memory:", "", "   ", "sqlite:///",
                                 "file::memory:", "file:events.db?mode=memory&cache=shared",
                                 "file:/var/lib/hookline/hookline.db",
                                 "sqlite:///events.db?mode=memory"])
def test_private_databases_are_refused_with_what_to_use(url: str):
    with pytest.raises(StorageRefused, match="use a file path every hookline process shares"):
        sqlite_path(url)
    with pytest.raises(ConfigError, match="postgresql://"):
        Config(db=url)
    with pytest.raises(StorageRefused):
        open_store(url)


def test_plain_files_and_postgres_urls_pass():
    assert sqlite_path("hookline.db") == "hookline.db"
    assert sqlite_path("sqlite:////var/lib/h.db") == "/var/lib/h.db"
    assert sqlite_path("sqlite:///rel/h.db") == "rel/h.db"
    assert sqlite_path("postgresql://u@db/hookline") is None
    with pytest.raises(ConfigError, match="unsupported"):
        sqlite_path("mysql://db/x")


def test_mountinfo_longest_prefix_decides_the_filesystem():
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 9

    def fstype(path: str) -> str:
        mount = mount_of(path, mounts)
        assert mount is not None
        return mount.fstype

    assert fstype("/var/lib/hookline") == "ext4"
    assert fstype("/srv/nfs/app") == "nfs4"
    assert fstype("/srv/nfs") == "nfs4"
    assert fstype("/srv/nfs/local/db") == "ext4"  # a local disk mounted inside the NFS tree
    assert fstype("/srv/nfsother") == "ext4"      # a prefix of the name is not a parent
    assert fstype("/home/me/remote/x") == "fuse.sshfs"
    assert fstype("/mnt/my disk/db") == "cifs"
    assert [m.mount_point for m in mounts if m.fstype == "cifs"] == ["/mnt/my disk"]


@pytest.mark.parametrize(("fstype", "unsafe"), [
    ("nfs", True), ("nfs4", True), ("cifs", True), ("smb3", True), ("9p", True),
    ("virtiofs", True), ("fuse", True), ("fuseblk", True), ("fuse.sshfs", True),
    ("fuse.glusterfs", True), ("ceph", True), ("lustre", True),
    ("ext4", False), ("xfs", False), ("btrfs", False), ("tmpfs", False), ("zfs", False),
])
def test_network_and_fuse_types_are_unsafe(fstype: str, unsafe: bool):
    assert unsafe_filesystem(fstype) is unsafe


def test_network_folder_refused_unless_opted_in():
    for db in ("/srv/nfs/hookline.db", "/home/me/remote/h.db", "/mnt/host/h.db",
               "/tmp/bound/h.db", "/mnt/my disk/h.db"):
        with pytest.raises(StorageRefused, match="allow_network_filesystem"):
            refuse_network_filesystem(db, allowed=False, mountinfo_text=MOUNTINFO)
        refuse_network_filesystem(db, allowed=True, mountinfo_text=MOUNTINFO)
    refuse_network_filesystem("/srv/nfs/local/h.db", allowed=False, mountinfo_text=MOUNTINFO)
    refuse_network_filesystem("/var/lib/h.db", allowed=False, mountinfo_text=MOUNTINFO)


def test_wal_that_does_not_take_is_refused_naming_the_filesystem(tmp_path: Path):
    """A real connection through SQLite's unix-dotfile VFS, which has no shared memory:
    `PRAGMA journal_mode = WAL` answers `delete` without an error, as on a filesystem that
    cannot map the -shm file. enable_wal must notice."""
    db_path = str(tmp_path / "nowal.db")
    db = sqlite3.connect(f"file:{db_path}?vfs=unix-dotfile", uri=True)
    try:
        with pytest.raises(StorageRefused, match=r"stayed in 'delete' mode.*filesystem"):
            enable_wal(db, db_path)
    finally:
        db.close()
    with pytest.raises(StorageRefused, match="nfs4 filesystem mounted at /srv/nfs"):
        check_journal_mode("delete", "/srv/nfs/h.db", MOUNTINFO)
    check_journal_mode("wal", "/srv/nfs/h.db", MOUNTINFO)
    ok = sqlite3.connect(db_path)
    try:
        enable_wal(ok, db_path)  # the default VFS has shared memory: WAL takes
    finally:
        ok.close()


def _filled_database(path: Path, rows: int) -> None:
    """A real hookline database with a filler table of `rows` 1 KB random blobs."""
    async def create() -> None:
        async with SqliteStore(str(path)):
            pass

    asyncio.run(create())
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE filler (id INTEGER PRIMARY KEY, blob BLOB)")
        db.executemany("INSERT INTO filler (blob) VALUES (?)",
                       ((os.urandom(1000),) for _ in range(rows)))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def damage_middle_pages(path: Path, pages: int = 4) -> None:
    """Write garbage over `pages` pages in the middle of the file (page 1 with the header and
    schema stays intact, so the database still opens)."""
    page_size = 4096
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek((size // page_size // 2) * page_size)
        fh.write(b"\xde\xad\xbe\xef" * (page_size * pages // 4))
        fh.flush()
        os.fsync(fh.fileno())


def test_quick_check_passes_a_sound_file_and_refuses_a_damaged_one(tmp_path: Path):
    path = tmp_path / "h.db"
    assert quick_check(str(tmp_path / "missing.db"), timeout_s=10) is True
    _filled_database(path, rows=2000)
    assert quick_check(str(path), timeout_s=30) is True
    damage_middle_pages(path)
    with pytest.raises(StorageRefused, match=r"damaged .*hookline restore SNAPSHOT --into"):
        quick_check(str(path), timeout_s=30)

    async def still_opens() -> None:  # the damage is invisible to a plain open
        async with SqliteStore(str(path)):
            pass

    asyncio.run(still_opens())


def test_quick_check_stops_at_its_time_bound(tmp_path: Path):
    """Past timeout_s the check is interrupted and reported incomplete (False), never
    mistaken for damage."""
    path = tmp_path / "big.db"
    _filled_database(path, rows=30_000)  # about 30 MB: far more than 1 ms of checking
    assert quick_check(str(path), timeout_s=0.001) is False

