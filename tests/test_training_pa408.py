"""PA408 backward-under-autocast: the AMP protocol of a training step, read statically (the step
walk's events). The hazard sample, its clean twin, the rule page's Example and Use instead, and
the ways real code is written."""
from training_rules import AMP_RULES, Audit, amp_found, amp_lines, assert_page_examples, line_of, sample


def test_the_clean_twin_gives_no_finding_and_the_message_is_filled():
    seen = Audit(*AMP_RULES).pair("pa408_backward_under_autocast", amp_lines("pa408_backward_under_autocast_hazard.py"))
    assert seen["PA408"].fix["autofix"] is False


def test_pa408_fires_at_the_backward_inside_autocast():
    path = sample("pa408_backward_under_autocast_hazard.py")
    assert amp_found(path) == [("PA408", line_of(path, "scaler.scale(loss).backward()"), None)]


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA408", tmp_path)
