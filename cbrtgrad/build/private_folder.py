"""Whether a folder is safe to load compiled code from: the one rule every loader asks.

cbrtgrad loads machine code from its cache folder: numba's pickled index and
objects for the kernels (:mod:`cbrtgrad.build.cache`), and the C++ builds of the
PyTorch entry and the MLX primitive (:mod:`cbrtgrad.build.native`). Whoever
can write that folder, or rename it or a folder above it, can put code of
their own there, which the next process runs. So a folder is used only where
no other user can change it, pip's rule for its own cache: the folder must be
owned by the current user and not writable by its group or others; each
folder above it, up to the first one the user owns, must be owned by the user
or by root and not writable by group or others, but for a root-owned folder
with the sticky bit (``/tmp``), where only a child's owner may rename it,
which is fine above a folder of the user's (or root's). Symbolic links are
resolved first, and the folder is then used by its resolved path.

Where a folder fails the rule, cbrtgrad warns once per process, naming it and
why, and loads nothing from it: the kernels are compiled in memory, the C++
builds go to a private temporary folder (``tempfile.mkdtemp``, mode 0700).

Windows has no owner and mode bits (``os.geteuid`` does not exist there):
nothing is checked, as pip checks nothing there; the default folder under
``%LOCALAPPDATA%`` is private to the user by its access list.
"""

from __future__ import annotations

import os
import stat
import warnings
from functools import lru_cache
from pathlib import Path

#: Mode bits that let someone other than the owner create, rename or delete entries.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH

_WARNED: set[str] = set()


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _parent_reason(path: Path, info: os.stat_result, child_uid: int, user: int) -> str | None:
    # A folder above the one code is loaded from: None where it is safe so far.
    if info.st_mode & stat.S_ISVTX and info.st_uid in (user, 0) and child_uid in (user, 0):
        return None  # /tmp: nobody but the child's owner (or root) can rename the child
    if info.st_mode & _OTHERS_WRITE:
        return f"{path} (a folder above it) is writable by {_who(info.st_mode)}"
    if info.st_uid not in (user, 0):
        return f"{path} (a folder above it) is owned by {_owner(info.st_uid)}"
    return None


def _who(mode: int) -> str:
    return " and ".join(
        name for bit, name in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others")) if mode & bit
    )


def unsafe_reason(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` is not safe to load compiled code from, or None where it is.

    Creates nothing: a folder that does not exist yet is judged as the
    current user would create it (their own, mode 0700), under the folders
    that exist above it.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder (its symbolic links are resolved first).

    Returns
    -------
    str or None
        A sentence naming the folder at fault and what is wrong with it.

    Examples
    --------
    >>> import tempfile
    >>> unsafe_reason(tempfile.mkdtemp()) is None
    True
    >>> import os, sys
    >>> mine = tempfile.mkdtemp()
    >>> os.chmod(mine, 0o777)
    >>> print(unsafe_reason(mine) if hasattr(os, "geteuid") else f"{mine} is writable by ...")
    ... # doctest: +ELLIPSIS
    /... is writable by its group and others
    """
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows: no owner and mode bits
        return None
    user = os.geteuid()
    path = Path(os.path.realpath(folder))
    child_uid = user  # a folder that does not exist yet is the user's once created
    target = True
    for current in (path, *path.parents):
        try:
            info = os.stat(current)
        except (FileNotFoundError, NotADirectoryError):
            # To be created by the user under what exists above (or it
            # cannot be: a file in the way, which the caller finds writing).
            target = False
            continue
        except OSError as error:
            return f"{current} cannot be checked ({error.strerror})"
        if target:
            if info.st_uid != user:
                return f"{current} is owned by {_owner(info.st_uid)}, not by this user"
            if info.st_mode & _OTHERS_WRITE:
                return f"{current} is writable by {_who(info.st_mode)}"
            target = False
        else:
            reason = _parent_reason(current, info, child_uid, user)
            if reason is not None:
                return reason
            sticky = info.st_mode & stat.S_ISVTX
            if info.st_uid == user and not sticky:
                return None  # the first folder above that is the user's (and private)
        child_uid = info.st_uid
    return None  # every folder above is root's, and none is writable by others


def private_folder(base: Path, *below: str, create: bool = True) -> Path | None:
    """``base / below...`` by its resolved path, where it is safe to load code from, else None.

    ``base`` (the cache folder a setting names) is judged by
    :func:`unsafe_reason`, the folders ``below`` it (created by cbrtgrad) must
    each be the user's and not writable by others. With ``create`` the
    missing ones are created with mode 0700, and the whole is judged again
    (a folder another user made in between is refused). Where it is unsafe,
    a ``RuntimeWarning`` names the folder and why, once per process.

    Examples
    --------
    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> private_folder(base, "key") == base.resolve() / "key"
    True
    """
    return _private_folder(str(base), below, create)


@lru_cache(maxsize=64)
def _private_folder(base: str, below: tuple[str, ...], create: bool) -> Path | None:
    # Cached: the answer is asked for each kernel a process compiles or loads.
    reason = unsafe_reason(base)
    resolved = Path(os.path.realpath(base))
    path = resolved.joinpath(*below)
    if reason is None:
        reason = _below_reason(resolved, below)
    if reason is None and create:
        try:
            _make_private(resolved, below)
        except OSError:
            return None  # cannot be written: the caller's "cache off"
        reason = unsafe_reason(base) or _below_reason(resolved, below)
    if reason is not None:
        if base not in _WARNED:
            _WARNED.add(base)
            warnings.warn(
                f"cbrtgrad: the cache folder {base} is not used, since another user could put "
                f"code of their own there for this process to run: {reason}. Kernels are "
                "compiled in memory and C++ builds made in a private temporary folder; set "
                "CBRTGRAD_CACHE_DIR to a folder of your own that only you can write",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return path


def _below_reason(base: Path, below: tuple[str, ...]) -> str | None:
    path = base
    user = os.geteuid() if hasattr(os, "geteuid") else None
    for name in below:
        path = path / name
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None  # the rest is created by the user, mode 0700
        except OSError as error:
            return f"{path} cannot be checked ({error.strerror})"
        if user is None:  # pragma: no cover - Windows
            continue
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            return f"{path} is not a folder"
        if info.st_uid != user:
            return f"{path} is owned by {_owner(info.st_uid)}, not by this user"
        if info.st_mode & _OTHERS_WRITE:
            return f"{path} is writable by {_who(info.st_mode)}"
    return None


def _make_private(base: Path, below: tuple[str, ...]) -> None:
    # One folder at a time, each 0700 (os.makedirs gives the ones above the
    # last the umask's mode, which may let the group write).
    path = Path(base.anchor)
    for part in (*base.relative_to(base.anchor).parts, *below):
        path = path / part
        if not path.exists():
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:  # made in between: judged again by the caller
                pass
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{path} cannot be written")
