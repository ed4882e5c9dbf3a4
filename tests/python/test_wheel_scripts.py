"""The wheel scripts' bad arguments are one line and exit status 2, before any root is made:
scripts/build-wheel (an unknown argument, --cuda without a toolkit), scripts/wheel-check (an
unknown argument) and scripts/wheel-fix-command (no wheel named)."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO / "scripts" / args[0]), *args[1:]], capture_output=True, text=True, timeout=60
    )


def test_build_wheel_refuses_an_unknown_argument_and_a_missing_toolkit(tmp_path: Path) -> None:
    r = run("build-wheel", "--cpu")
    assert r.returncode == 2
    assert r.stdout.strip() == "build-wheel: unknown argument --cpu (--help says what it takes)"
    r = run("build-wheel", "--cuda", str(tmp_path / "no-such-toolkit"))
    assert r.returncode == 2
    assert "build-wheel: no CUDA toolkit at" in r.stdout and "no-such-toolkit" in r.stdout
    r = run("build-wheel", "--cuda", str(tmp_path))  # a folder without bin/nvcc
    assert r.returncode == 2
    assert r.stdout.strip() == f"build-wheel: {tmp_path} has no bin/nvcc"


@pytest.mark.skipif(os.geteuid() != 0, reason="wheel-check reads its arguments as root (sudo)")
def test_wheel_check_refuses_an_unknown_argument() -> None:
    r = run("wheel-check", "--gpu")
    assert r.returncode == 2
    assert r.stdout.strip() == "wheel-check: unknown argument --gpu (--help says what it takes)"


def test_wheel_fix_command_without_a_wheel_prints_its_usage() -> None:
    r = run("wheel-fix-command")
    assert r.returncode == 2
    assert "wheel-fix-command WHEEL" in r.stderr
