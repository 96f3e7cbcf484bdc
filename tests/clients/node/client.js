'use strict';
// node-postgres (npm pg) client for dpproxy's real-client tests (tests/clients/test_clients.py).
//
// Connects with DPP_HOST, DPP_PORT, DPP_USER, DPP_PASSWORD and DPP_DB (password authentication:
// SCRAM-SHA-256 on the servers the tests start), runs a fixed scenario on ONE connection and
// prints ONE JSON object on stdout: for each step its value, or
// {"error": {"sqlstate": ..., "message": ...}}. pg returns bigint and numeric as strings; the
// tests convert them.

const { Client } = require('pg');

function env(name) {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`environment variable ${name} is not set`);
  }
  return value;
}

function error(err) {
  return { error: { sqlstate: err.code === undefined ? null : err.code, message: String(err.message) } };
}

async function main() {
  const result = {};
  const step = async (name, run) => {
    try {
      result[name] = await run();
      return true;
    } catch (err) {
      result[name] = error(err);
      return false;
    }
  };
  const client = new Client({
    host: env('DPP_HOST'),
    port: Number(env('DPP_PORT')),
    user: env('DPP_USER'),
    password: env('DPP_PASSWORD'),
    database: env('DPP_DB'),
    application_name: 'dpproxy-node-client-test',
    connectionTimeoutMillis: 10000,
    query_timeout: 60000,
  });
  const one = async (text, values) => {
    const res = await client.query({ text, values, rowMode: 'array' });
    if (res.rows.length !== 1 || res.rows[0].length !== 1) {
      throw new Error(`expected one value, got ${JSON.stringify(res.rows)}`);
    }
    return res.rows[0][0];
  };
  const rows = async (text, values) => (await client.query({ text, values, rowMode: 'array' })).rows;

  if (await step('connect', async () => { await client.connect(); return true; })) {
    try {
      await step('select_1', () => one('SELECT 1'));
      await step('version', () => one('SELECT version()'));
      await step('param_count', () => one('SELECT COUNT(*) FROM adult WHERE age > $1', [40]));
      await step('grouped', () => rows('SELECT sex, AVG(age) FROM adult GROUP BY sex'));
      await step('columns', () => rows(
        'SELECT column_name, data_type FROM information_schema.columns '
          + 'WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
        ['public', 'adult'],
      ));
      await step('refused', () => rows('SELECT * FROM adult LIMIT 5'));
      await step('after_refusal', () => one('SELECT COUNT(*) FROM adult'));
    } finally {
      await step('close', async () => { await client.end(); return true; });
    }
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
