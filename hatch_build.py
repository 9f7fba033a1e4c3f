"""Build hook: compile ``toolseam._speedups`` (src/toolseam/_speedups.c) into the wheel.

The extension is an accelerator: toolseam runs the same without it (`toolseam._json` then
takes its Python walk). So a machine without a C compiler still gets a working, pure-Python
wheel, with a warning; set ``TOOLSEAM_REQUIRE_SPEEDUPS=1`` to make that an error instead
(CI does, and tests/test_speedups.py checks the extension is there when it is set).

An editable install compiles the extension in place, next to its source, where the
editable path finds it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("src/toolseam/_speedups.c")
REQUIRED = "TOOLSEAM_REQUIRE_SPEEDUPS"


def _compile(root: Path, output_dir: Path) -> Path:
    """Compile the extension into ``output_dir``; the path of the built library."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    extension = Extension(
        "toolseam._speedups",
        sources=[str(root / SOURCE)],
        extra_compile_args=[] if sys.platform == "win32" else ["-O2"],
    )
    distribution = Distribution({"name": "toolseam", "ext_modules": [extension]})
    command = build_ext(distribution)
    command.build_lib = str(output_dir)
    command.build_temp = str(output_dir / "temp")
    command.ensure_finalized()
    command.run()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = output_dir / "toolseam" / f"_speedups{suffix}"
    if not built.exists():
        raise RuntimeError(f"the compiler left no {built.name} in {output_dir}")
    return built


class SpeedupsBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles the C accelerator and marks the wheel as platform-specific."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile before the wheel (or the editable install) is assembled."""
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        try:
            if version == "editable":
                with tempfile.TemporaryDirectory() as scratch:
                    built = _compile(root, Path(scratch))
                    target = root / "src" / "toolseam" / built.name
                    target.write_bytes(built.read_bytes())
            else:
                # Kept until the wheel is written (force_include reads it then): finalize.
                self._scratch = Path(tempfile.mkdtemp(prefix="toolseam-speedups-"))
                built = _compile(root, self._scratch)
                build_data["force_include"][str(built)] = f"toolseam/{built.name}"
        except Exception as error:
            if os.environ.get(REQUIRED) == "1":
                raise RuntimeError(
                    f"toolseam._speedups did not build and {REQUIRED}=1: {error}"
                ) from error
            self.app.display_warning(
                f"toolseam._speedups did not build ({error}); the wheel is pure Python "
                "and takes large arguments by the slower Python walk"
            )
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the compiler's scratch folder once the wheel holds the library."""
        scratch: Path | None = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
            self._scratch = None
