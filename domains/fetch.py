"""Raw downloads: resumable, checksummed, or taken from a local mirror.

Raw files live under `$POSBENCH_DATA/raw/<domain>/` (default `./data`). When `$POSBENCH_MIRROR` is set it
replaces the network: `<mirror>/<domain>/<relative path>` must hold the file laid out as the real download has
it, and it is copied (checksum still verified) instead of downloaded.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from domains.hash_cache import cached_sha256, remember_sha256
from domains.store import sha256_file


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


def fetch(domain: str, relpath: str, url: str, sha256: str | None = None, chunk: int = 1 << 20) -> Path:
    """Return the local path of a raw file, fetching it first if needed.

    Order: an existing local copy with the right checksum is used as is; else the mirror (if set); else `url`,
    resuming a partial `.part` download with an HTTP Range request. The file is renamed into place only after
    its checksum matches, so a killed or corrupt download never looks complete.
    """
    dest = raw_dir(domain) / relpath
    if dest.exists() and (sha256 is None or cached_sha256([dest])[dest] == sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    mirror = mirror_root()
    if mirror is not None:
        source = mirror / domain / relpath
        if not source.is_file():
            raise FetchError(f"{source}: not in the mirror $POSBENCH_MIRROR={mirror} (expected {domain}/{relpath})")
        shutil.copyfile(source, part)
    else:
        _download(url, part, chunk)
    if sha256 is not None:
        got = sha256_file(part)
        if got != sha256:
            part.unlink()
            origin = mirror / domain / relpath if mirror is not None else url
            raise FetchError(
                f"{origin}: sha256 {got}, expected {sha256}; the file is corrupt or not the one the suite was built for"
            )
    os.replace(part, dest)
    if sha256 is not None:
        remember_sha256(dest, sha256)  # the renamed file is the one just checked: no second read of it
    return dest


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
