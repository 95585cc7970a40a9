"""The Submit page's command for making a bundle works on a machine without a `zip`
program, as the README's does (Python's own zipfile), and makes one the site accepts
(issue 40, item 9: the page said `zip`, the README that no `zip` is needed)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from evaluator.intake.bundle import read_bundle

pytestmark = pytest.mark.django_db

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pytorch"


def test_the_submit_pages_command_bundles_the_example_with_python_alone(
    client, alice, team, tmp_path
):
    client.force_login(alice)
    page = client.get(reverse("submissions:submit")).content.decode()
    command = html.unescape(re.search(r'<pre class="code"><code>(.*?)</code>', page).group(1))
    shutil.copytree(EXAMPLE, tmp_path / "my-bundle")
    # A PATH that holds Python and nothing else: no zip, no unzip.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "python3").symlink_to(sys.executable)
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=tmp_path,
        env={"PATH": str(tools), "HOME": os.environ.get("HOME", "/")},
        check=True,
    )
    slugs = sorted(path.stem for path in EXAMPLE.glob("*.py"))
    bundle = read_bundle("bundle.zip", (tmp_path / "bundle.zip").read_bytes(), known_slugs=slugs)
    assert sorted(bundle.solutions) == slugs
