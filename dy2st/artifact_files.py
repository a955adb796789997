"""The files of an artifact, read and written without trusting what is on disk.

Reading (`ArtifactDir`): the directory is opened once and every member is opened relative to
it by a plain name with `O_NOFOLLOW | O_NONBLOCK`, so a symlink, `..`, an absolute path, a FIFO
or a device never gets read; `fstat` of the open file must show a regular file whose size is
the one the manifest states before a byte is read.

Writing (`write_artifact`): the files go into a fresh temporary directory beside the target,
are flushed to disk, and the directory is renamed into place. An earlier artifact at the
target is moved aside only once the new one is complete, and removed after the rename, so a
crash or an error mid-save leaves it intact. A symlink at the target is never followed, and a
directory that is not a dy2st artifact is replaced only with `overwrite=True`.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from typing import Callable

from dy2st.errors import ArtifactError, ExportError
from dy2st.input_spec import user_origin

MAX_MANIFEST_BYTES = 64 << 20

ProblemError = Callable[[str, str], ArtifactError]  # (file name, problem) -> the error


def path_argument(path, function: str, error_type: type) -> str:
    """The `path` argument of `dy2st.save`/`dy2st.load` as a str; anything but a str, bytes or
    os.PathLike, or a path with a NUL byte, is an `error_type` (ExportError, ArtifactError)
    saying what to pass, where `os.open` would raise a bare TypeError or ValueError."""
    try:
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else None
    except TypeError:  # an os.PathLike whose __fspath__ gives neither str nor bytes
        text = None
    if text is None:
        raise error_type(f"{function}: path must be a directory path (a str or os.PathLike), got "
                         f"{type(path).__name__} {path!r:.60}.", user_origin(),
                         advice=f"pass the artifact's directory, e.g. {function}(..., 'artifact') or a pathlib.Path.")
    if "\0" in text:
        raise error_type(f"{function}: the path {text!r:.80} holds a NUL character, which no file name can.",
                         user_origin(), advice="pass the artifact's directory without the NUL.")
    return text


class ArtifactDir:
    """An open artifact directory; use as a context manager (closes the directory's fd)."""

    def __init__(self, path: str, error: ProblemError):
        self.path, self.error = path, error
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise error("", "no such directory.") from None
        except NotADirectoryError:
            raise error("", "not a directory; pass the directory written by dy2st.save.") from None
        except PermissionError:
            raise error("", "permission denied.") from None
        except OSError as err:  # a symlink loop, a name too long, ...
            raise error("", f"cannot be opened ({os.strerror(err.errno)}).") from None

    def __enter__(self) -> "ArtifactDir":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._fd)

    def read(self, name: str, size: int | None, limit: int = 1 << 50) -> bytes:
        """The bytes of member `name`, which must be a regular file of `size` bytes (any size up
        to `limit` when `size` is None)."""
        fd = self._open(name)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self.error(name, f"not a regular file ({_file_kind(info.st_mode)}); an artifact holds "
                                  "regular files only.")
            if size is not None and info.st_size != size:
                raise self.error(name, f"the file is truncated or extended: {info.st_size} bytes, the manifest "
                                  f"says {size}.")
            if info.st_size > limit:
                raise self.error(name, f"the file is {info.st_size} bytes, more than the {limit} allowed.")
            return self._read_exactly(fd, name, info.st_size)
        finally:
            os.close(fd)

    def _open(self, name: str) -> int:
        if not name or os.sep in name or (os.altsep and os.altsep in name) or name in (".", ".."):
            raise self.error(name, "not a plain file name inside the artifact.")
        try:
            return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                           dir_fd=self._fd)
        except FileNotFoundError:
            raise self.error(name, "the file is missing.") from None
        except OSError as err:
            if err.errno == errno.ELOOP or os.path.islink(os.path.join(self.path, name)):
                raise self.error(name, "a symbolic link; an artifact holds regular files only, and a link "
                                  "could point anywhere.") from None
            raise self.error(name, f"cannot be opened ({os.strerror(err.errno)}).") from None

    def _read_exactly(self, fd: int, name: str, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 24))
            if not chunk:
                raise self.error(name, f"the file shrank while it was read ({size - remaining} of {size} bytes).")
            chunks.append(chunk)
            remaining -= len(chunk)
        if os.read(fd, 1):
            raise self.error(name, "the file grew while it was read.")
        return b"".join(chunks)


def _file_kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return next((text for test, text in kinds if test(mode)), "not a plain file")


# -- writing -----------------------------------------------------------------------------------
def write_artifact(target: str, files: dict[str, bytes], overwrite: bool,
                   is_artifact: Callable[[str], bool]) -> None:
    """Write `files` (name -> bytes) as the directory `target`, replacing it as a whole."""
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        _check_target(target, overwrite, is_artifact)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.dy2st-", dir=parent)
    except OSError as err:  # the parent is a file, a name too long, no permission, ...
        raise _write_error(target, err) from None
    try:
        for name, data in files.items():
            _write_new_file(staging, name, data)
        os.chmod(staging, 0o755)  # mkdtemp makes it 0o700
        _fsync_dir(staging)
        _swap_into_place(staging, target, parent)
    except BaseException:  # (a full disk stays the OSError it is: not a wrong path)
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_error(target: str, err: OSError) -> ExportError:
    if isinstance(err, FileExistsError):  # os.makedirs met a file where a directory of the path goes
        problem = f"{err.filename!r:.200} is a file, not a directory"
    else:
        where = f" ({err.filename!r:.200})" if err.filename and err.filename != target else ""
        problem = f"{os.strerror(err.errno) if err.errno else err}{where}"
    return ExportError(f"Cannot write the artifact {target!r:.200}: {problem}.", user_origin(),
                       advice="choose a path whose parent is a directory you can write to, with names of at "
                       "most 255 bytes.")


def _check_target(target: str, overwrite: bool, is_artifact: Callable[[str], bool]) -> None:
    if not os.path.lexists(target) or overwrite:
        return
    if os.path.islink(target):
        raise ExportError(f"The target {target!r} is a symbolic link; dy2st.save does not follow links "
                          "(the link could point anywhere).",
                          advice="save to a real path, or pass overwrite=True to replace the link itself.")
    if not os.path.isdir(target):
        raise ExportError(f"The target {target!r} exists and is not a directory.",
                          advice="choose another path, or pass overwrite=True to replace it.")
    if os.listdir(target) and not is_artifact(target):
        raise ExportError(f"The target {target!r} is a directory that is not a dy2st artifact; dy2st.save "
                          "replaces the whole directory, so it would delete those files.",
                          advice="choose a new or empty directory, or pass overwrite=True to replace it.")


def _write_new_file(directory: str, name: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(os.path.join(directory, name), flags, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _swap_into_place(staging: str, target: str, parent: str) -> None:
    """Rename `staging` to `target`; an existing target is moved aside first and removed last."""
    old = None
    if os.path.lexists(target):
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.dy2st-old-", dir=parent)
        os.rmdir(old)  # only its unique name is wanted
        os.rename(target, old)  # renames a symlink itself, never what it points to
    try:
        os.rename(staging, target)
    except OSError:
        if old is not None:
            os.rename(old, target)  # put the earlier artifact back
        raise
    _fsync_dir(parent)
    if old is not None:
        _remove(old)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)  # does not follow symlinks inside
    else:
        os.unlink(path)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

