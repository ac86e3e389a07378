from __future__ import annotations


class GpuFormatter:  # placeholder
    pass
