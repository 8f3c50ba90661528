"""The contract kit proven on the two test-tree fixes (real distributions, real torch)."""

from torchfix_core.testing import FixContract


class TestDemoCheckpointContract(FixContract):
    """A fix whose trigger (torch.utils.checkpoint) is already imported by import torch."""

    fix_id = "demo-checkpoint"
    patched = [("torch.utils.checkpoint", "detach_variable")]


class TestDemoDynamoContract(FixContract):
    """A fix that waits for torch._dynamo and patches a function and a class attribute."""

    fix_id = "demo-dynamo"
    patched = [("torch._dynamo", "reset"), ("torch._dynamo.eval_frame", "OptimizedModule.__init__")]


def test_state_to_expect_follows_the_validated_range_then_the_test_s_own_evidence(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Inside demo-dynamo's range (torch >=2.5,<2.99) the test's evidence decides; outside it the
    range check answers first, whatever the evidence says."""
    import torch
    from torchfix_core.testing import state_to_expect

    assert state_to_expect("demo-dynamo", True) == "applied"
    assert state_to_expect("demo-dynamo", False) == "not-needed"
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    assert state_to_expect("demo-dynamo", True) == "out-of-range"
    assert state_to_expect("demo-dynamo", False) == "out-of-range"


def test_activation_case_fails_a_fix_whose_implementation_is_loaded_before_its_trigger() -> None:
    """The ``activated_at_import_torch`` case itself fails when the fix's implementation module is
    loaded by the time ``import torch`` returns while the fix still waits for its trigger (here the
    interpreter imports demo-dynamo's implementation before the case runs; its trigger, torch._dynamo,
    is not imported)."""
    import json

    from torchfix_core.testing import ScenarioFailed, run_json_script

    config = {"case": "activated_at_import_torch", "fix_id": "demo-dynamo", "patched": [], "expected": "applied"}
    code = "import sys, torchfix_demo_dynamo.patch\nfrom torchfix_core.testing._cases import main\nsys.exit(main(sys.argv[1:]))"
    try:
        run_json_script(["-c", code, json.dumps(config)], timeout=300)
    except ScenarioFailed as exc:
        assert "import torch imported the implementation torchfix_demo_dynamo.patch" in str(exc), exc
    else:
        raise AssertionError("the case passed although the implementation was imported before its trigger")


def test_a_library_version_outside_the_range_makes_the_fix_out_of_range_unless_unversioned() -> None:
    """The kit's ``status_with_library_version`` on demo-dynamo (torch >=2.5,<2.99): torch reporting
    0.0.0 is out of range; a release inside the range is applied by the probe. (A fix declaring its
    library ``unversioned``, as the Magi adapters do, is judged by its probe at 0.0.0 too: their
    tests in nox -s magi.)"""
    from torchfix_core.testing import status_with_library_version

    low = status_with_library_version("demo-dynamo", "torch", "0.0.0")
    assert low["state"] == "out-of-range", low
    assert "0.0.0 is outside the validated range" in str(low["reason"]), low
    inside = status_with_library_version("demo-dynamo", "torch", "2.13.0")
    assert inside["state"] == "applied", inside
