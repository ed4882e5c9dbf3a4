"""The engine's CPU floor (x86-64-v3) is said in words before its code loads (_cpu.py), and
the command entry point (crossover/_cli.py) refuses in one line where it cannot run the binary."""

import os
import subprocess
import sys

from crossover import _cli, _cpu

HASWELL = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma bmi1 bmi2 f16c movbe abm\n"
SANDY_BRIDGE = "processor\t: 0\nflags\t\t: fpu sse2 sse4_2 avx popcnt\n"


def test_a_v3_cpu_lacks_nothing():
    assert _cpu.missing_features(HASWELL, "x86_64") == []


def test_an_older_cpu_is_named_with_what_it_lacks():
    missing = _cpu.missing_features(SANDY_BRIDGE, "x86_64")
    assert missing == ["avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"]
    message = _cpu.floor_message(missing)
    assert "x86-64-v3" in message and "avx2, fma" in message


def test_no_flags_line_or_another_architecture_is_not_refused():
    assert _cpu.missing_features("processor\t: 0\n", "x86_64") == []
    assert _cpu.missing_features(SANDY_BRIDGE, "aarch64") == []


def test_this_machine_passes():
    # The suite runs here, so the engine loaded: the check must agree.
    assert _cpu.missing_features() == []


def test_the_command_refuses_in_one_line_with_status_2(monkeypatch, capsys):
    monkeypatch.setattr(_cli, "missing_features", lambda: ["avx2", "fma"])
    try:
        _cli.main()
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("main() went on to the binary")
    err = capsys.readouterr().err
    assert err.startswith("crossover: crossover needs an x86-64-v3 CPU") and err.count("\n") == 1


def test_the_package_refuses_with_an_import_error():
    # A fresh interpreter whose /proc/cpuinfo reads as a Sandy Bridge's: importing crossover
    # raises ImportError naming the floor, before crossover._core is loaded.
    code = (
        "import builtins, io, sys\n"
        "real = builtins.open\n"
        f"fake = {SANDY_BRIDGE!r}\n"
        "def fake_open(p, *a, **k):\n"
        "    return io.StringIO(fake) if p == '/proc/cpuinfo' else real(p, *a, **k)\n"
        "builtins.open = fake_open\n"
        "try:\n"
        "    import crossover\n"
        "except ImportError as e:\n"
        "    print('core loaded:', 'crossover._core' in sys.modules)\n"
        "    print(e)\n"
        "else:\n"
        "    print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    ).stdout
    assert "core loaded: False" in out, out
    assert "x86-64-v3" in out and "avx2" in out, out


def test_the_command_without_its_binary_says_so_in_one_line_with_status_2(monkeypatch, capsys):
    # A package built without the command (a build folder's copy, a broken install).
    monkeypatch.setattr(_cli, "missing_features", lambda: [])
    monkeypatch.setattr(_cli, "binary", lambda: "/nonexistent/crossover/bin/crossover")
    try:
        _cli.main()
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("main() went on to exec a missing binary")
    err = capsys.readouterr().err
    assert "has no command binary (/nonexistent/crossover/bin/crossover is missing)" in err
    assert err.count("\n") == 1


def test_a_cuda_build_without_nvidias_libraries_names_the_one_missing_and_the_packages():
    loader = "libcublasLt.so.13: cannot open shared object file: No such file or directory"
    message = _cpu.nvidia_library_message(loader)
    assert message is not None
    assert "libcublasLt.so.13" in message and loader in message
    assert "pip install nvidia-cublas nvidia-cudnn-cu13" in message
    assert "libcudnn.so.9" in _cpu.nvidia_library_message(
        "libcudnn.so.9: cannot open shared object file: No such file or directory"
    )


def test_another_loader_error_is_left_as_the_loader_said_it():
    assert _cpu.nvidia_library_message("libdnnl.so.2: cannot open shared object file") is None
