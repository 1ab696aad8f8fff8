from jaxmbd import cli


def test_cli_prints_summary_and_runs(capsys):
    assert cli.main(["grid_tree4", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "16 bodies" in out and "nv=16" in out
    assert out.count("|ID(FD(tau)) - tau| = ") == 2
    for line in out.splitlines():
        if "|ID(FD(tau)) - tau|" in line:
            assert float(line.rsplit("= ", 1)[1]) < 1e-9
