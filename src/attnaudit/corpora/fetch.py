"""Find a corpus's raw files and verify them: the mirror if it holds them, else the official URLs.

Order: ``mirror`` argument, else env ``ATTNAUDIT_MIRROR``; if ``<mirror>/<spec.mirror_dir>`` holds every file
the corpus is read from there. Otherwise the files are gathered in ``raw_dir``: already-verified files are
kept, files the mirror does hold are copied, the rest are downloaded (3 tries, exponential backoff) via a
temporary file. Checksums are verified either way; a mismatch raises with both hashes and leaves no partial
file. Archives are extracted into a temporary folder that is renamed into place only once complete.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from attnaudit import AttnauditError
from attnaudit.corpora.registry import CorpusFile, CorpusSpec, CorpusTree
from attnaudit.io import home_expanded, sha256_file

log = logging.getLogger(__name__)

MIRROR_ENV = "ATTNAUDIT_MIRROR"
TRIES = 3
BACKOFF_SECONDS = 1.0  # waits 1 s, then 2 s between the 3 tries
TIMEOUT_SECONDS = 60
VERIFIED_MARKER = ".attnaudit-verified.json"  # written into an extracted tree before it is renamed into place


@dataclass
class Located:
    """Where a corpus's verified files are (``root``), where they came from, and one record per file."""

    root: Path
    source: dict
    files: list[dict]


def mirror_path(mirror: str | os.PathLike | None) -> Path | None:
    """The mirror argument, else ``$ATTNAUDIT_MIRROR``, else None. A mirror that is not a directory is a mistake
    (a typo would otherwise send every corpus to the network without a word): stop naming where it was set."""
    value = mirror if mirror else os.environ.get(MIRROR_ENV)
    if not value:
        return None
    path = home_expanded(value)
    if not path.is_dir():
        where = "corpora.mirror (--mirror)" if mirror else f"${MIRROR_ENV}"
        raise AttnauditError(f"{where}: {path} is not a directory; fix the path, or unset it to download")
    return path


def locate(spec: CorpusSpec, mirror: Path | None, raw_dir: Path) -> Path:
    """The folder holding ``spec``'s verified files (mirror or ``raw_dir``); see :func:`fetch_corpus`."""
    return fetch_corpus(spec, mirror, raw_dir).root


def fetch_corpus(spec: CorpusSpec, mirror: Path | None, raw_dir: Path) -> Located:
    """Locate, download if needed, and verify every file of ``spec``."""
    if not spec.files:
        raise AttnauditError(f"corpus {spec.name!r} has no files to fetch")
    base = mirror_path(mirror)
    mirror_dir = base / spec.mirror_dir if base is not None and spec.mirror_dir else None
    urls = [u for item in spec.files for u in _item_file(item).urls]
    if mirror_dir is not None and all(_present(item, mirror_dir) for item in spec.files):
        log.info("%s: verifying the mirror copy in %s", spec.name, mirror_dir)
        records = [_verify_item(item, mirror_dir) for item in spec.files]
        return Located(mirror_dir, {"kind": "mirror", "path": str(mirror_dir), "urls": urls}, records)
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    if mirror_dir is not None:
        log.info("%s: mirror %s does not hold every file; using %s", spec.name, mirror_dir, raw_dir)
    records = [_obtain(item, raw_dir, mirror_dir) for item in spec.files]
    source = {
        "kind": "raw_dir",
        "path": str(raw_dir),
        "mirror_searched": str(mirror_dir) if mirror_dir else None,
        "urls": urls,
    }
    return Located(raw_dir, source, records)


def _item_file(item: CorpusFile | CorpusTree) -> CorpusFile:
    return item.archive if isinstance(item, CorpusTree) else item


def _present(item: CorpusFile | CorpusTree, folder: Path) -> bool:
    return (folder / (item.sums if isinstance(item, CorpusTree) else item.path)).is_file()


# --- verification -------------------------------------------------------------------------------------------


def verify_file(path: Path, expected: str | None) -> str:
    """sha256 of ``path``; raise naming the file and both hashes if it is not ``expected`` (``None``: no checksum
    is pinned for this file; warn loudly and return the hash, which the manifest records)."""
    actual = sha256_file(path)
    if expected is None:
        log.warning(
            "UNPINNED: %s has no pinned sha256 in the corpus registry; it is NOT verified (sha256 %s recorded in "
            "the manifest). Check it against the official distribution yourself.",
            path,
            actual,
        )
        return actual
    if actual != expected.lower():
        raise AttnauditError(
            f"{path}: sha256 mismatch: expected {expected}, actual {actual} "
            "(corrupt or altered file; replace it with the official one)"
        )
    return actual


def verify_tree(tree: CorpusTree, folder: Path) -> dict:
    """Check the SHA256SUMS list against its pinned sha256, then every file it lists (paths relative to
    ``folder``), and that the tree holds no other file. Files are hashed in 1 MiB chunks; ~0.6 s for the 50,002
    IMDB files with a warm cache."""
    sums = folder / tree.sums
    verify_file(sums, tree.sums_sha256)
    n, listed = 0, set()
    for line_no, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        expected, sep, rel = line[:64], line[64:66], line[66:]
        if len(expected) != 64 or sep not in ("  ", " *") or not rel:
            raise AttnauditError(f"{sums}:{line_no}: expected '<sha256>  <path>', found {line[:80]!r}")
        path = folder / rel
        if not path.is_file():
            raise AttnauditError(f"{path}: listed in {sums}:{line_no} but missing")
        with open(path, "rb") as handle:
            actual = hashlib.file_digest(handle, "sha256").hexdigest()
        if actual != expected:
            raise AttnauditError(
                f"{path}: sha256 mismatch: expected {expected} (from {sums}:{line_no}), actual {actual}"
            )
        n += 1
        listed.add(rel)
    reject_unlisted(folder, tree.root, listed, sums)
    return {
        "path": tree.sums,
        "sha256": tree.sums_sha256,
        "files_verified": n,
        "verified": "SHA256SUMS list (pinned sha256) and every listed file; no other file in the tree",
    }


def reject_unlisted(folder: Path, root: str, listed: set[str], where: Path) -> None:
    """The readers read whole folders of a tree: a file under ``folder/root`` that ``listed`` (paths relative to
    ``folder``) does not name — an editor backup, a message added by hand — would enter the corpus unverified."""
    for path in sorted((folder / root).rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and path.name != VERIFIED_MARKER and rel not in listed:
            raise AttnauditError(
                f"{path}: in a verified corpus tree but not listed in {where}; the corpus must be exactly the "
                "official files: remove it (or delete the tree and rerun to extract it again)"
            )


def _verify_item(item: CorpusFile | CorpusTree, folder: Path) -> dict:
    if isinstance(item, CorpusTree):
        return verify_tree(item, folder)
    path = folder / item.path
    return {
        "path": item.path,
        "sha256": verify_file(path, item.sha256),
        "bytes": path.stat().st_size,
        "verified": "pinned sha256" if item.sha256 else "UNPINNED: no published checksum; sha256 recorded only",
    }


# --- obtaining files in raw_dir -----------------------------------------------------------------------------


def _obtain(item: CorpusFile | CorpusTree, raw_dir: Path, mirror_dir: Path | None) -> dict:
    if isinstance(item, CorpusTree):
        return _obtain_tree(item, raw_dir, mirror_dir)
    dest = raw_dir / item.path
    if dest.is_file():
        return _verify_item(item, raw_dir)
    source = mirror_dir / item.path if mirror_dir is not None else None
    if source is not None and source.is_file():
        verify_file(source, item.sha256)
        log.info("copying %s → %s", source, dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        os.close(fd)
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, dest)
        finally:
            Path(tmp).unlink(missing_ok=True)
    else:
        download(item, dest, mirror_dir)
    return _verify_item(item, raw_dir)


def _obtain_tree(tree: CorpusTree, raw_dir: Path, mirror_dir: Path | None) -> dict:
    dest = raw_dir / tree.root
    marker = dest / VERIFIED_MARKER
    if dest.exists() and not marker.is_file():
        raise AttnauditError(
            f"{dest} exists but was not extracted from a verified archive by attnaudit "
            f"(no {VERIFIED_MARKER}); delete it and rerun"
        )
    if not dest.exists():
        _obtain(tree.archive, raw_dir, mirror_dir)
        extract(raw_dir / tree.archive.path, raw_dir, tree)
    archive = json.loads(marker.read_text(encoding="utf-8"))
    if "files" not in archive:
        raise AttnauditError(
            f"{dest} was extracted by an attnaudit that did not record its files' sha256; delete it and rerun "
            "(it is extracted again from the verified archive)"
        )
    verify_extracted(dest, archive["files"])
    return {
        "path": tree.root,
        "archive": tree.archive.path,
        "sha256": archive["sha256"],
        "files_verified": len(archive["files"]),
        "verified": "official archive's pinned sha256, extracted; every file re-checked against its extraction",
    }


def verify_extracted(dest: Path, files: dict[str, str]) -> None:
    """A tree extracted earlier is still the archive's files: each one's sha256 as recorded at extraction, and
    no other file (an edit in ``raw_dir`` would otherwise enter the corpus unverified)."""
    for rel, expected in files.items():
        path = dest / rel
        if not path.is_file():
            raise AttnauditError(f"{path}: extracted from the verified archive but now missing; delete {dest}")
        actual = sha256_file(path)
        if actual != expected:
            raise AttnauditError(
                f"{path}: changed since it was extracted from the verified archive (sha256 {actual}, extracted "
                f"{expected}); delete {dest} and rerun to extract it again"
            )
    reject_unlisted(dest.parent, dest.name, {f"{dest.name}/{rel}" for rel in files}, dest / VERIFIED_MARKER)


def download(item: CorpusFile, dest: Path, mirror_dir: Path | None = None) -> None:
    """Download ``item`` to ``dest`` via a temporary file: each URL up to :data:`TRIES` times with exponential
    backoff (once if it times out or answers 4xx); the file is renamed into place only if its sha256 matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in item.urls:
        for attempt in range(1, TRIES + 1):
            fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
            os.close(fd)
            try:
                log.info("downloading %s (try %d/%d)", url, attempt, TRIES)
                digest = _download_once(url, Path(tmp))
                if item.sha256 is not None and digest != item.sha256:
                    raise AttnauditError(
                        f"{url}: sha256 mismatch for {dest.name}: expected {item.sha256}, "
                        f"actual {digest}; nothing was written to {dest}"
                    )
                os.replace(tmp, dest)
                return
            except urllib.error.HTTPError as err:
                errors.append(f"{url}: HTTP {err.code} {err.reason}")
                if 400 <= err.code < 500:
                    break  # not transient
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
                if timed_out(err):  # a host that never answers: three more minutes of waiting would not help
                    errors.append(f"{url}: no answer within {TIMEOUT_SECONDS} s")
                    break
                errors.append(f"{url}: {err}")
            finally:
                Path(tmp).unlink(missing_ok=True)
            if attempt < TRIES:
                time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
    searched = (
        f"not in the mirror folder {mirror_dir}"
        if mirror_dir is not None
        else f"no mirror given (set corpora.mirror in the config, or {MIRROR_ENV}, to a folder holding it)"
    )
    raise AttnauditError(
        f"{dest.name} is missing: {searched}, and downloading it from {', '.join(item.urls)} failed "
        f"({'; '.join(dict.fromkeys(errors)) or 'no URL'}). Place the official file "
        f"(sha256 {item.sha256 or 'not pinned'}) at "
        f"{dest} or in the mirror."
    )


def timed_out(err: BaseException) -> bool:
    """A connection or read that timed out (a firewall or dead proxy that drops packets), not a refusal."""
    return isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError)


def _download_once(url: str, tmp: Path) -> str:
    digest, size = hashlib.sha256(), 0
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response, open(tmp, "wb") as out:
        expected = response.headers.get("Content-Length")
        while block := response.read(1 << 20):
            out.write(block)
            digest.update(block)
            size += len(block)
    if expected is not None and int(expected) != size:
        raise OSError(f"truncated download: {size} of {expected} bytes")
    return digest.hexdigest()


def extract(archive: Path, raw_dir: Path, tree: CorpusTree) -> None:
    """Extract ``archive`` (zip or tar[.gz]) into a temporary folder, then rename its ``archive_prefix`` to
    ``raw_dir/tree.root``. A truncated or corrupt archive raises and leaves nothing behind."""
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=raw_dir))
    try:
        log.info("extracting %s", archive)
        try:
            if zipfile.is_zipfile(archive):
                with zipfile.ZipFile(archive) as handle:
                    handle.extractall(tmp)
            else:
                with tarfile.open(archive) as handle:
                    handle.extractall(tmp, filter="data")
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError) as err:
            raise AttnauditError(f"{archive}: cannot extract (truncated or corrupt archive?): {err}") from err
        src = tmp / tree.archive_prefix if tree.archive_prefix else tmp
        if not src.is_dir():
            raise AttnauditError(f"{archive}: expected a top-level folder {tree.archive_prefix!r} in the archive")
        files = {p.relative_to(src).as_posix(): sha256_file(p) for p in sorted(src.rglob("*")) if p.is_file()}
        marker = {"archive": archive.name, "sha256": tree.archive.sha256, "files": files}
        (src / VERIFIED_MARKER).write_text(json.dumps(marker), encoding="utf-8")
        os.rename(src, raw_dir / tree.root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
