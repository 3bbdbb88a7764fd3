"""scripts/benchmark/model_oracle.py: a record of the RDMA golden model's outputs and the
comparison of a tree's model against it."""

import json
import pickle

from scripts.benchmark import model_oracle

SMALL = {"kind": "writes", "messages": 2, "qps": 1, "sizes": [64], "top": {}}
REFUSED = {"kind": "writes", "messages": 2, "qps": 1, "sizes": [64], "top": {},
           "knobs": {"ring_evry": 4}}


def test_differences_names_the_outputs_that_differ():
    assert model_oracle.differences({"a": 1, "b": [2]}, {"a": 1, "b": [2]}) == []
    assert model_oracle.differences({"a": 1, "b": [2]}, {"a": 1, "b": [3], "c": 0}) == ["b", "c"]
    assert model_oracle.differences(("raised", "X", "m"), {"a": 1}) == ["output"]


def test_refused_parameters_are_an_output_with_their_error():
    out = model_oracle.model_output(REFUSED)
    assert out[:2] == ("refused", "ValueError") and "ring_evry" in out[2]


def test_soak_chunks_are_runnable_scenarios():
    chunks = model_oracle.soak_chunks()
    assert len(chunks) == 5
    assert {c["kind"] for c in chunks} == {"writes", "mixed"}
    assert all(c["faults_ab"]["drop_rate"] > 0 for c in chunks)


def test_record_then_compare(tmp_path, capsys):
    params = tmp_path / "params.jsonl"
    params.write_text(json.dumps(SMALL) + "\n" + json.dumps(REFUSED) + "\n")
    record = tmp_path / "out.pkl"
    assert model_oracle.main(["record", str(params), str(record)]) == 0
    outputs = pickle.loads(record.read_bytes())
    assert len(outputs) == 2 and outputs[0]["cycles"] > 0 and outputs[1][0] == "refused"
    assert model_oracle.main(["compare", str(params), str(record)]) == 0
    assert "0 of 2 scenarios differ" in capsys.readouterr().out
    outputs[0] = dict(outputs[0], cycles=outputs[0]["cycles"] + 1)   # a changed model
    record.write_bytes(pickle.dumps(outputs))
    assert model_oracle.main(["compare", str(params), str(record)]) == 1
    out = capsys.readouterr().out
    assert "scenario 0 (writes): differs in cycles" in out and "1 of 2 scenarios differ" in out
