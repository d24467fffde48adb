"""What :func:`cbrtgrad.warm` reports: each kernel built (:class:`WarmedKernel`) and the
whole (:class:`WarmReport`); :mod:`cbrtgrad.warming` gives both under its name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WarmedKernel:
    """One kernel :func:`cbrtgrad.warm` built.

    Parameters
    ----------
    name : str
        As ``cbrtgrad info`` and ``cbrtgrad.build.compile.built_kernels()`` name it.
    outcome : str
        ``"compiled"`` (and saved in the cache), ``"loaded"`` (it was there) or
        ``"not built"`` (an optional unit whose build failed: the PyTorch
        entry, a speed-up the bridge runs without).
    seconds : float
        Wall time of the build in its worker.
    note : str
        Why a unit was not built (the build's error), else empty.
    """

    name: str
    outcome: str
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class WarmReport:
    """What :func:`cbrtgrad.warm` did.

    Parameters
    ----------
    folder : str
        The cache folder the kernels are in (one per CPU, settings and versions).
    kernels : tuple of WarmedKernel
        In the order they finished.
    seconds : float
        Wall time of the whole warm.
    jobs : int
        Processes used.
    """

    folder: str
    kernels: tuple[WarmedKernel, ...]
    seconds: float
    jobs: int

    @property
    def compiled(self) -> list[str]:
        """The kernels compiled (the others were already cached, or not built)."""
        return [k.name for k in self.kernels if k.outcome == "compiled"]

    @property
    def not_built(self) -> list[str]:
        """The optional units whose build failed (each kernel's note says why)."""
        return [k.name for k in self.kernels if k.outcome == "not built"]

    def describe(self) -> str:
        """A line per kernel, then a summary line.

        Examples
        --------
        >>> report = WarmReport("/c", (WarmedKernel("ufunc cube_root float64", "compiled", 3.0),),
        ...                     3.5, 2)
        >>> print(report.describe())
          compiled  ufunc cube_root float64   3.0 s
        1 kernel in /c: 1 compiled, 0 already cached, in 3.5 s with 2 processes
        """
        width = max((len(k.name) for k in self.kernels), default=0)
        lines = [
            f"  {k.outcome:<9} {k.name:<{width}} {k.seconds:5.1f} s"
            + (f"  ({k.note.splitlines()[0].rstrip(':')})" if k.note else "")
            for k in self.kernels
        ]
        count, compiled, failed = len(self.kernels), len(self.compiled), len(self.not_built)
        lines.append(
            f"{count} kernel{'s' if count != 1 else ''} in {self.folder}: {compiled} compiled, "
            f"{count - compiled - failed} already cached, "
            + (f"{failed} not built, " if failed else "")
            + f"in {self.seconds:.1f} s with {self.jobs} process{'es' if self.jobs != 1 else ''}"
        )
        return "\n".join(lines)
