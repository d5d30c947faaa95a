"""A manager installed without its agent templates says so, in words a user can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamic_scoring.addon.controllers.lifecycle.deploy import TEMPLATES_UNAVAILABLE, _reason, _where
from dynamic_scoring.addon.errors import TemplatesUnavailableError
from dynamic_scoring.addon.render.agent import render_agent

MCA = {"metadata": {"name": "dynamic-scoring", "namespace": "cluster1"}, "spec": {}}


def test_rendering_from_a_directory_without_templates_names_the_template_and_what_to_do(
    tmp_path: Path,
) -> None:
    with pytest.raises(TemplatesUnavailableError) as err:
        render_agent(mca=MCA, adc=None, templates_dir=tmp_path)
    text = str(err.value)
    assert "is not installed in" in text and str(tmp_path) in text
    assert "make image" in text
    assert _reason(err.value) == TEMPLATES_UNAVAILABLE
    assert _where(err.value, "cluster1/some-adc") == "", "not the ADC's fault: the message must not blame it"


def test_the_real_templates_still_render() -> None:
    assert render_agent(mca=MCA, adc=None).manifests
