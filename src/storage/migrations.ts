/**
 * The schema, as an append-only list of versioned migrations. Never edit a released entry:
 * existing databases have already applied it; add a new version instead.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "api keys and usage",
    // Times are ISO-8601 UTC strings (Date#toISOString), so text order is time order.
    sql: `
      CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
        prefix TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
      ) STRICT;

      CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        key_id INTEGER REFERENCES api_keys (id),
        team TEXT,
        project TEXT,
        model TEXT NOT NULL,
        checkpoint TEXT,
        request_id TEXT,
        prompt_tokens INTEGER NOT NULL CHECK (prompt_tokens >= 0),
        completion_tokens INTEGER NOT NULL CHECK (completion_tokens >= 0),
        cached_tokens INTEGER NOT NULL CHECK (cached_tokens >= 0),
        latency_ms REAL NOT NULL CHECK (latency_ms >= 0),
        status INTEGER NOT NULL,
        CHECK ((team IS NULL) = (project IS NULL))
      ) STRICT;

      CREATE INDEX usage_time ON usage (time);
      CREATE INDEX usage_key ON usage (key_id);
    `,
  },
  {
    version: 2,
    name: "usage rows with a project and no team",
    // OpenAI-Project carries a project id alone; a team still needs its project. SQLite changes a
    // CHECK only by rebuilding the table.
    sql: `
      CREATE TABLE usage_v2 (
        id INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        key_id INTEGER REFERENCES api_keys (id),
        team TEXT,
        project TEXT,
        model TEXT NOT NULL,
        checkpoint TEXT,
        request_id TEXT,
        prompt_tokens INTEGER NOT NULL CHECK (prompt_tokens >= 0),
        completion_tokens INTEGER NOT NULL CHECK (completion_tokens >= 0),
        cached_tokens INTEGER NOT NULL CHECK (cached_tokens >= 0),
        latency_ms REAL NOT NULL CHECK (latency_ms >= 0),
        status INTEGER NOT NULL,
        CHECK (team IS NULL OR project IS NOT NULL)
      ) STRICT;
      INSERT INTO usage_v2 SELECT * FROM usage;
      DROP TABLE usage;
      ALTER TABLE usage_v2 RENAME TO usage;
      CREATE INDEX usage_time ON usage (time);
      CREATE INDEX usage_key ON usage (key_id);
    `,
  },
  {
    version: 3,
    name: "stored responses",
    // A Responses API response kept for retrieval and previous_response_id: the conversation's
    // input items (a previous response's included) and the response object, both as JSON text.
    // expires_at NULL: kept until deleted.
    sql: `
      CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        key_id INTEGER REFERENCES api_keys (id),
        created_at TEXT NOT NULL,
        expires_at TEXT,
        input TEXT NOT NULL,
        response TEXT NOT NULL
      ) STRICT;
      CREATE INDEX responses_expiry ON responses (expires_at);
    `,
  },
];
