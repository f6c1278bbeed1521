"""Raw files: downloaded (resumable, checked), or copied from a local mirror (checked).

Raw files live under `$POSBENCH_DATA/raw/<domain>/` (default `./data`). When `$POSBENCH_MIRROR` is set it
replaces the network: `<mirror>/<domain>/<relative path>` holds the file laid out as the real download has it.

The rule for a local copy and its mirror file (`copy_verified`, also what the Sleep-EDF and MAESTRO folder
mirrors use): a local copy with the mirror file's size and modification time is that file's copy (copies keep
the mtime) and is used as it is, once its sha256 matches where one is known. Any other mirror file, a changed one
included, is checked first: the domain's `verify` (a file without a known checksum: EDF framing, zip members, an
md5 table's line) on the mirror file itself; then it is copied under a temporary name beside the local copy, and
the copy must have the mirror file's size and, where one is known, the sha256; only then is it renamed over the
local copy. A mirror file that fails raises a named error (FetchError, or the domain's own) naming it and the
reason, and the local copy stays as it was. A file that only the local folder holds is used (checked against
its sha256 where one is known). A download is checked the same way before it is renamed into place.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from domains.atomic import atomic_path
from domains.hash_cache import cached_sha256, remember_sha256
from domains.store import sha256_file

Verify = Callable[[Path], object]  # raises a named error (naming the path it is given) when the file is not usable


class FetchError(RuntimeError):
    """A raw file could not be obtained or failed its check; the message names the file and what was expected."""


def data_root() -> Path:
    return Path(os.environ.get("POSBENCH_DATA", "data"))


def mirror_root() -> Path | None:
    mirror = os.environ.get("POSBENCH_MIRROR")
    return Path(mirror) if mirror else None


def raw_dir(domain: str) -> Path:
    return data_root() / "raw" / domain


def store_dir(domain: str) -> Path:
    return data_root() / "stores" / domain


def fetch(
    domain: str, relpath: str, url: str, sha256: str | None = None, verify: Verify | None = None, chunk: int = 1 << 20
) -> Path:
    """Return the local path of a raw file, fetching it first if needed.

    With a mirror: the mirror's file by the module's rule (`copy_verified`); a file the mirror lacks is taken from
    the local folder if it is there. Without: a local copy is used when its sha256 matches (or none is known);
    else `url` is downloaded, resuming a partial `.part` file with an HTTP Range request, checked (`sha256`,
    `verify`) and only then renamed into place, so a killed or corrupt download never looks complete.
    """
    dest = raw_dir(domain) / relpath
    mirror = mirror_root()
    if mirror is not None and (mirror / domain / relpath).is_file():
        return copy_verified(mirror / domain / relpath, dest, sha256, verify)
    if dest.exists() and (sha256 is None or cached_sha256([dest])[dest] == sha256):
        return dest
    if mirror is not None:
        source = mirror / domain / relpath
        raise FetchError(f"{source}: not in the mirror $POSBENCH_MIRROR={mirror} (expected {domain}/{relpath})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    _download(url, part, chunk)
    try:
        if sha256 is not None:
            _check_sha256(part, sha256, url)
        if verify is not None:
            verify(part)
    except Exception:  # a bad download is not resumed; an interrupted check keeps it
        part.unlink(missing_ok=True)
        raise
    os.replace(part, dest)
    if sha256 is not None:
        remember_sha256(dest, sha256)  # the renamed file is the one just checked: no second read of it
    return dest


def copy_verified(source: Path, dest: Path, sha256: str | None = None, verify: Verify | None = None) -> Path:
    """Bring the mirror file `source` to `dest` by the module's rule; returns `dest`. A failure leaves `dest`
    as it was."""
    try:
        want = source.stat()
    except OSError as err:
        raise FetchError(f"{source}: cannot be read from the mirror ({err})") from err
    if dest.is_file():
        have = dest.stat()
        same = (have.st_size, have.st_mtime_ns) == (want.st_size, want.st_mtime_ns)
        if same and (sha256 is None or cached_sha256([dest])[dest] == sha256):
            return dest
    if verify is not None:
        verify(source)
    with atomic_path(dest) as tmp:
        try:
            shutil.copy2(source, tmp)
        except OSError as err:
            raise FetchError(f"{source}: copying it to {dest} failed ({err}); {dest} is left as it was") from err
        if (tmp.stat().st_size, source.stat().st_mtime_ns) != (want.st_size, want.st_mtime_ns):
            raise FetchError(f"{source}: changed while it was copied; {dest} is left as it was, run again")
        if sha256 is not None:
            _check_sha256(tmp, sha256, source)
    if sha256 is not None:
        remember_sha256(dest, sha256)
    return dest


def _check_sha256(path: Path, sha256: str, origin: str | Path) -> None:
    got = sha256_file(path)
    if got != sha256:
        raise FetchError(
            f"{origin}: sha256 {got}, expected {sha256}; the file is corrupt or not the one the suite was built for"
        )


def _download(url: str, part: Path, chunk: int) -> None:
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            resumed = have and response.status == 206
            with open(part, "ab" if resumed else "wb") as handle:
                while block := response.read(chunk):
                    handle.write(block)
            expected = response.headers.get("Content-Length")
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the partial file is already complete
            return
        raise FetchError(f"{url}: HTTP {err.code} {err.reason} while downloading to {part}") from err
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        raise FetchError(
            f"{url}: download failed ({err}); {part} keeps {part.stat().st_size if part.exists() else 0} bytes and a "
            "re-run resumes from there. Without network, set POSBENCH_MIRROR to a folder holding the raw files."
        ) from err
    if expected is not None:
        size = part.stat().st_size
        want = (have if resumed else 0) + int(expected)
        if size != want:
            raise FetchError(f"{url}: truncated download, {size} of {want} bytes in {part}; re-run to resume")
