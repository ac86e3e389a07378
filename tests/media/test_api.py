"""The media package's surface, its lazy registration and the error without the extra."""

from __future__ import annotations

import subprocess
import sys

import flowplex
import flowplex.media

MEDIA_KERNELS = ("AudioFileSink", "AudioFileSource", "VideoFileSink", "VideoFileSource")


def test_the_surface_is_pinned() -> None:
    assert flowplex.media.__all__ == ["INSTALL_HINT", "PIX_FMTS", "AudioFileSink", "AudioFileSource", "VideoFileSink",
                                      "VideoFileSource", "frame_shape"]
    assert flowplex.media.INSTALL_HINT == "pip install 'flowplex[media]'"


def test_every_kernel_has_a_docstring_with_its_options() -> None:
    for name in MEDIA_KERNELS:
        doc = flowplex.kernels.kernel_class(name).__doc__ or ""
        assert "Options:" in doc and "path:" in doc and "Lifecycle:" in doc, name


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_import_flowplex_registers_the_names_without_loading_av_or_soundfile() -> None:
    code = ("import sys, flowplex\n"
            f"assert set({MEDIA_KERNELS!r}) <= set(flowplex.registered_kernels())\n"
            "print(sorted(m for m in ('av', 'soundfile', 'flowplex.media') if m in sys.modules))\n")
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_the_extra_a_graph_fails_to_start_with_the_install_line() -> None:
    # A None entry in sys.modules makes `import av` raise ImportError, as it does where PyAV is not installed.
    code = """
import sys
sys.modules['av'] = sys.modules['soundfile'] = None
import flowplex
for yaml in ("nodes: [{ name: m, kernel: VideoFileSource, output_ports: [y], options: { path: x } }]",
             "nodes: [{ name: m, kernel: AudioFileSink, input_ports: [x], options: { path: x } }]\\ninput_ports: [x]"):
    with flowplex.Graph.from_yaml(yaml) as g:
        try:
            g.start()
            g.wait_done(timeout=30)
        except flowplex.KernelError as exc:
            print(exc)
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    for line, kernel, package in zip(lines, ("VideoFileSource", "AudioFileSink"), ("PyAV", "soundfile"), strict=True):
        assert line.startswith(f"kernel failed: [m] open failed: ConfigError: node 'm' ({kernel}) needs {package}, "
                               "which cannot be imported (")
        assert line.endswith("); install the media extra with: pip install 'flowplex[media]'")
