-- Each namespace's quota (spec: JSON of v1alpha1.QuotaSpec, the limits an
-- admin set on cpu, memory, extended resources and active runnables). Its
-- usage is not stored: it is summed from the active runnables'
-- status.requests when the submitter admits one and when the API shows it.

-- +goose Up
CREATE TABLE quotas (
    namespace        TEXT        PRIMARY KEY,
    spec             TEXT        NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    resource_version BIGINT      NOT NULL
);

-- +goose Down
DROP TABLE quotas;
