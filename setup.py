"""What ships, found rather than listed (the rest is in pyproject.toml).

The code is found (``webapp*``; the library in flask-submit-once/ is a distribution of its
own, and dev/, tests/, examples/, bench/ and scripts/ never ship). templates/ and static/
stay at the top of the repository and are no packages: the build copies them into the
wheel as ``webapp/templates/`` and ``webapp/static/`` (package data, no Python, no
``__pycache__``). An editable install and a checkout have no copies; create_app then
finds the folders next to the package (``webapp.shipped_folder``).
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

#: Folders at the top of the repository that ship inside the package, and what of them.
DATA_FOLDERS = {"templates": ("*.html",), "static": ("*.css", "*.js", "*.html")}


def data_files(folder: str) -> list[Path]:
    """The files of ``folder`` that ship: the suffixes it serves, nothing a run left."""
    root = Path(folder)
    return sorted(
        path
        for pattern in DATA_FOLDERS[folder]
        for path in root.rglob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
    )


class BuildWithData(build_py):
    """build_py, plus templates/ and static/ copied under webapp/ in the build."""

    def run(self) -> None:
        super().run()
        # the checkout's folders are used as they are
        if self.editable_mode:
            return
        for folder in DATA_FOLDERS:
            for path in data_files(folder):
                target = Path(self.build_lib) / "webapp" / path
                self.mkpath(str(target.parent))
                self.copy_file(str(path), str(target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        shipped = [
            str(Path(self.build_lib) / "webapp" / path)
            for folder in DATA_FOLDERS
            for path in data_files(folder)
        ]
        return [*super().get_outputs(include_bytecode), *shipped]


setup(
    packages=find_packages(
        include=["webapp", "webapp.*"],
        exclude=["dev*", "tests*", "examples*", "bench*", "scripts*"],
    ),
    cmdclass={"build_py": BuildWithData},
)
