"""Build hook for the optional C extension; every other setting is in pyproject.toml.

``optional=True``: where no C compiler or Python headers are available the build prints a
warning and installs the package without the extension, and ``flowplex.transport`` runs its
pure-Python hot paths instead (same behaviour, about three times slower per message).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "flowplex.transport._fastring",
            sources=["src/flowplex/transport/_fastring.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
