"""The typed models agree with the server's own /openapi.json."""

from __future__ import annotations

import httpx

from episodic_client import models


def schemas(server):
    doc = httpx.get(server.base_url + "/openapi.json").json()
    return doc["components"]["schemas"]


def fields_of(schema):
    """(properties, required) of a schema; for a oneOf, the union and the intersection."""
    if "oneOf" in schema:
        parts = [fields_of(s) for s in schema["oneOf"]]
        props = set().union(*(p for p, _ in parts))
        required = set.intersection(*(r for _, r in parts))
        return props, required
    return set(schema.get("properties", {})), set(schema.get("required", []))


def test_every_model_field_is_in_its_schema_and_required_fields_agree(server):
    all_schemas = schemas(server)
    checked = []
    for model, name in models.SCHEMAS.items():
        assert name in all_schemas, f"{model.__name__}: no schema {name} in /openapi.json"
        props, required = fields_of(all_schemas[name])
        declared = set(model.__annotations__) | set(model.__required_keys__) | set(model.__optional_keys__)
        assert declared <= props, f"{model.__name__} declares {declared - props} that {name} lacks"
        assert set(model.__required_keys__) == required, (
            f"{model.__name__}: required {sorted(model.__required_keys__)} but {name} requires {sorted(required)}"
        )
        checked.append(name)
    # The main request and answer shapes are all covered.
    assert {"EventWrite", "WriteResponse", "StoredEvent", "RecallRequest", "RecallResponse", "Hit", "BatchResponse", "Interaction", "ObserveResponse", "TimelinePage", "ProblemDoc"} <= set(checked)


def test_the_models_name_every_field_of_the_main_schemas(server):
    all_schemas = schemas(server)
    for model in (models.EventWrite, models.StoredEvent, models.WriteResponse, models.RecallRequest, models.Scope, models.Hit, models.ScoreBreakdown, models.Interaction):
        props, _ = fields_of(all_schemas[models.SCHEMAS[model]])
        declared = set(model.__required_keys__) | set(model.__optional_keys__)
        assert props == declared, f"{model.__name__} misses {props - declared}"
