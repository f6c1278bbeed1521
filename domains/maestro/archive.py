"""MAESTRO's raw data: the official zip (downloaded or from the mirror) or an unpacked folder, its CSV index, and
the bytes of each performance present.

A zip must hold every performance its CSV lists (else it fails, naming the missing ones); an unpacked folder
(maestro-v3.0.0.csv at its root, each MIDI file at its CSV path, as the sample mirror has 11 of the 1276) may
hold only some: the preparation uses those present, and fails only when none is present.

No checksum of the zip or of a MIDI file is published (the CSV has none), so a downloaded or mirrored zip is
checked by `check_zip` (the CSV, every performance it lists, every member's CRC), a mirrored CSV by reading it
(each performance listed once: a second row would be a second "performance" of one file, possibly in another
split), and a mirrored MIDI file by parsing it with symusic, miditok's reader (`midi_check`), before any of them
replaces a local copy (`domains.fetch`'s rule): a mirror MIDI file that does not parse fails naming it, and a
readable local copy stays. Where no readable local copy exists nothing is lost by copying it: the file is then
skipped at preparation with the reason, like one that parses but does not tokenise.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from domains.fetch import FetchError, Verify, copy_verified, fetch, mirror_root, raw_dir
from domains.hash_cache import cached_sha256
from domains.maestro.tokenizer import MidiFile, UnreadableMidi, read_score

DOMAIN = "maestro"
URL = "https://storage.googleapis.com/magentadata/datasets/maestro/v3.0.0/maestro-v3.0.0-midi.zip"
ZIP_NAME = "maestro-v3.0.0-midi.zip"
ZIP_ROOT = "maestro-v3.0.0/"  # every member of the official zip is under this folder
CSV_NAME = "maestro-v3.0.0.csv"
CSV_SPLITS = {"train": "train", "validation": "val", "test": "test"}
MIDI_SUMS = "midi/SHA256SUMS"  # raw_sha256 key of an unpacked folder's MIDI files: sha256 of "sha256  name" lines
# raw_sha256 of the whole unpacked set (the CSV and its 1,276 performances), as maestro-confirm's runs record it; a
# zip is always whole (check_zip)
WHOLE_SET = {
    CSV_NAME: "cb88a64a12971a995dd41852aa3a33879501cf70d01b9a6feb637f4ad8d8ddff",
    MIDI_SUMS: "e87ff6f6dbf4cdeaeabb7fbad053634a6b1310c9e71bee4e0d57cf2dc1758484",
}


def is_whole_set(raw_sha256: dict[str, str]) -> bool:
    """Whether raw digests (meta.json's raw_sha256, or a run's raw data hashes without `raw/`) are the whole set's."""
    return ZIP_NAME in raw_sha256 or all(raw_sha256.get(name) == digest for name, digest in WHOLE_SET.items())


@dataclass(frozen=True)
class Performance:
    midi_filename: str  # relative to the dataset root, e.g. 2018/MIDI-...midi
    csv_split: str  # the CSV's split, as train/val/test


def read_index(text: str, origin: str) -> list[Performance]:
    """The performances a MAESTRO CSV lists, in its order."""
    reader = csv.DictReader(io.StringIO(text))
    missing = {"midi_filename", "split"} - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f"{origin}: not a MAESTRO index, columns {sorted(missing)} are missing")
    performances, first_line = [], {}
    for line, row in enumerate(reader, start=2):
        if row["split"] not in CSV_SPLITS:
            raise ValueError(f"{origin} line {line}: split {row['split']!r}, expected one of {list(CSV_SPLITS)}")
        name = row["midi_filename"]
        if name in first_line:
            raise ValueError(
                f"{origin} line {line}: {name} is listed again (first at line {first_line[name]}); each performance "
                "must be listed once, so that it is in one split"
            )
        first_line[name] = line
        performances.append(Performance(name, CSV_SPLITS[row["split"]]))
    if not performances:
        raise ValueError(f"{origin}: the index lists no performance")
    return performances


def read_index_file(path: Path) -> list[Performance]:
    """The performances the MAESTRO CSV at `path` lists."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a MAESTRO index, not UTF-8 text ({err})") from err
    return read_index(text, str(path))


def check_zip(path: Path) -> list[Performance]:
    """The performances of the zip at `path`, once it is known to be a whole MAESTRO MIDI archive: the CSV inside,
    every performance it lists, every member's CRC."""
    archive = MaestroArchive({ZIP_NAME: path})
    try:
        for member in archive.zip.infolist():
            try:
                with archive.zip.open(member) as handle:
                    while handle.read(1 << 20):
                        pass
            except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as err:
                raise FetchError(f"{path}: member {member.filename} is damaged ({err})") from err
    finally:
        archive.close()
    return archive.index


class MaestroArchive:
    """The CSV index and the bytes of each performance present, read from the zip or from a folder."""

    def __init__(self, raw: dict[str, Path]) -> None:
        if ZIP_NAME in raw:
            self.source = "zip"
            self.origin = raw[ZIP_NAME]
            try:
                self.zip: zipfile.ZipFile | None = zipfile.ZipFile(self.origin)
            except zipfile.BadZipFile as err:
                raise FetchError(f"{self.origin}: not a valid zip archive ({err}); delete it and fetch again") from err
            self.index_origin = f"{self.origin}:{ZIP_ROOT}{CSV_NAME}"
            try:
                self.index = self.present = self._check_zip()
            except BaseException:
                self.zip.close()
                raise
        else:
            self.source, self.zip = "folder", None
            self.origin = raw[CSV_NAME].parent
            self.index_origin = str(raw[CSV_NAME])
            self.index = read_index_file(raw[CSV_NAME])
            self.present = [p for p in self.index if p.midi_filename in raw]
            if not self.present:
                raise FetchError(
                    f"{self.origin}: none of the {len(self.index)} performances listed in {CSV_NAME} is present "
                    "(each MIDI file belongs at its midi_filename path, relative to the CSV)"
                )

    def _check_zip(self) -> list[Performance]:
        """The CSV inside the zip, once every performance it lists is known to be in the archive too."""
        members = set(self.zip.namelist())
        if ZIP_ROOT + CSV_NAME not in members:
            raise FetchError(f"{self.origin}: {ZIP_ROOT}{CSV_NAME} is missing; not the MAESTRO v3.0.0 MIDI archive")
        index = read_index(self.zip.read(ZIP_ROOT + CSV_NAME).decode("utf-8"), f"{self.origin}:{CSV_NAME}")
        absent = [p.midi_filename for p in index if ZIP_ROOT + p.midi_filename not in members]
        if absent:
            raise FetchError(
                f"{self.origin}: {len(absent)} of the {len(index)} performances its CSV lists are missing from the "
                f"archive: {', '.join(absent[:5])}{', ...' if len(absent) > 5 else ''} (delete it to fetch it again)"
            )
        return index

    def read(self, name: str) -> bytes:
        if self.zip is not None:
            return self.zip.read(ZIP_ROOT + name)
        return (self.origin / name).read_bytes()

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def fetch_archive() -> dict[str, Path]:
    """Local raw data: {ZIP_NAME: path} or, for an unpacked copy, {CSV_NAME: path, <midi_filename>: path, ...}.

    Without a mirror, a local zip is used, else a local unpacked copy (from an earlier mirror), else the zip is
    downloaded. With a mirror, its zip is copied if it has one, else its unpacked folder. Each file is checked as
    the module doc says before it replaces a local copy.
    """
    local = raw_dir(DOMAIN)
    mirror = mirror_root()
    if mirror is None:
        if not (local / ZIP_NAME).exists() and (local / CSV_NAME).is_file():
            return unpacked_files(local)
        return {ZIP_NAME: fetch(DOMAIN, ZIP_NAME, URL, verify=check_zip)}
    source = mirror / DOMAIN
    if (source / ZIP_NAME).is_file():
        return {ZIP_NAME: fetch(DOMAIN, ZIP_NAME, URL, verify=check_zip)}
    if not (source / CSV_NAME).is_file() and (mirror / CSV_NAME).is_file():
        source = mirror  # the mirror is itself the unpacked set (its index at the top, as MAESTRO ships unpacked)
    if not (source / CSV_NAME).is_file():
        raise FetchError(
            f"{source}: this MAESTRO mirror folder holds neither {ZIP_NAME} nor {CSV_NAME} (the index of the "
            "unpacked dataset, with each MIDI file at its midi_filename path); $POSBENCH_MIRROR/maestro must hold one, "
            "or $POSBENCH_MIRROR be the unpacked set itself"
        )
    copy_verified(source / CSV_NAME, local / CSV_NAME, verify=read_index_file)
    for performance in read_index_file(source / CSV_NAME):
        if (source / performance.midi_filename).is_file():
            copy_verified(
                source / performance.midi_filename,
                local / performance.midi_filename,
                verify=midi_check(local / performance.midi_filename),
            )
    return unpacked_files(local)


def midi_problem(path: Path) -> str | None:
    """Why the MIDI file at `path` cannot be parsed, or None when it can."""
    try:
        read_score(path.read_bytes())
    except UnreadableMidi as err:
        return str(err)
    except OSError as err:
        return f"cannot be read ({err})"
    return None


def midi_check(local: Path) -> Verify:
    """`copy_verified`'s check of a mirror MIDI file that would replace `local` (the module docstring): one that
    does not parse fails, naming it, while `local` holds a readable copy, which stays as it was."""

    def verify(source: Path) -> None:
        problem = midi_problem(source)
        if problem is not None and local.is_file() and midi_problem(local) is None:
            raise FetchError(
                f"{source}: {problem}; the local copy {local} (a readable MIDI file) is kept: replace the mirror "
                "file with a good copy, or delete the local one to use the mirror's as it is (skipped, named)"
            )

    return verify


def unpacked_files(root: Path) -> dict[str, Path]:
    index = read_index_file(root / CSV_NAME)
    present = {p.midi_filename: root / p.midi_filename for p in index if (root / p.midi_filename).is_file()}
    return {CSV_NAME: root / CSV_NAME, **present}


def archive_hashes(raw: dict[str, Path]) -> dict[str, str]:
    """meta.json's raw_sha256: the zip's, or the CSV's and one digest over every MIDI file's sha256 (cached)."""
    digests = cached_sha256(raw.values())
    if ZIP_NAME in raw:
        return {ZIP_NAME: digests[raw[ZIP_NAME]]}
    sums = "".join(f"{digests[path]}  {name}\n" for name, path in sorted(raw.items()) if name != CSV_NAME)
    return {CSV_NAME: digests[raw[CSV_NAME]], MIDI_SUMS: hashlib.sha256(sums.encode()).hexdigest()}


def read_midi_files(archive: MaestroArchive) -> tuple[list[MidiFile], dict[str, str]]:
    """The bytes and sha256 of each performance present; those that cannot be read are skipped with the reason."""
    files, skipped = [], {}
    for performance in archive.present:
        try:
            data = archive.read(performance.midi_filename)
        except (OSError, zipfile.BadZipFile) as err:  # a damaged zip member (bad CRC) or an unreadable file
            skipped[performance.midi_filename] = f"cannot be read ({err})"
            continue
        files.append(MidiFile(performance.midi_filename, hashlib.sha256(data).hexdigest(), data))
    return files, skipped
