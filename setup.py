"""The packages that ship, found rather than listed (the rest is in pyproject.toml).

pyproject.toml can either find packages or map one onto another folder, not both: the
code is found (``webapp*``; the library in flask-submit-once/ is a distribution of its
own, and dev/, tests/, examples/, bench/ and scripts/ never ship), and templates/ and
static/, which stay at the top of the repository, are mapped in as the data packages
``webapp.templates`` and ``webapp.static``. Both the wheel and the editable install
(scripts/venv.sh) see them there, and create_app looks them up through the import
system, never by a path into the checkout.
"""

from setuptools import find_namespace_packages, find_packages, setup

DATA_PACKAGES = {"webapp.templates": "templates", "webapp.static": "static"}

setup(
    packages=[
        *find_packages(include=["webapp", "webapp.*"],
                       exclude=["dev*", "tests*", "examples*", "bench*", "scripts*"]),
        *DATA_PACKAGES,
        # Their subfolders (templates/orders/ ...), named so setuptools knows they ship.
        *(f"{package}.{sub}" for package, folder in DATA_PACKAGES.items()
          for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])),
    ],
    package_dir=DATA_PACKAGES,
)
