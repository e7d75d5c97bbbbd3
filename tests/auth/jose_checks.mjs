// What the MCP conformance harness's mocks check, run with the same library they use (jose):
// reads {proofs: [{proof, method, url, accessToken?, nonce?}], assertion: {jwt, publicJwk,
// audience}} on stdin, prints one verdict per item on stdout. Used by test_jose_interop.py.
import { createHash } from "node:crypto";
import * as jose from "jose";

const ALGS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"];
const normalized = (url) => {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/$/, "")}`;
};

async function checkProof({ proof, method, url, accessToken, nonce }) {
  const header = jose.decodeProtectedHeader(proof);
  if (header.typ !== "dpop+jwt") return { ok: false, error: "typ" };
  if (!ALGS.includes(header.alg)) return { ok: false, error: "alg" };
  if (!header.jwk || header.jwk.d !== undefined) return { ok: false, error: "jwk" };
  const key = await jose.importJWK(header.jwk, header.alg);
  const { payload } = await jose.jwtVerify(proof, key, { algorithms: ALGS });
  if (typeof payload.jti !== "string") return { ok: false, error: "jti" };
  if (payload.htm !== method) return { ok: false, error: "htm" };
  if (payload.htu.includes("?") || payload.htu.includes("#")) return { ok: false, error: "htu query" };
  if (normalized(payload.htu) !== normalized(url)) return { ok: false, error: "htu" };
  if (Math.abs(Math.floor(Date.now() / 1000) - payload.iat) > 300) return { ok: false, error: "iat" };
  if (nonce !== undefined && payload.nonce !== nonce) return { ok: false, error: "nonce" };
  if (accessToken !== undefined) {
    const ath = createHash("sha256").update(accessToken, "ascii").digest("base64url");
    if (payload.ath !== ath) return { ok: false, error: "ath" };
  }
  return { ok: true, jti: payload.jti, jkt: await jose.calculateJwkThumbprint(header.jwk, "sha256") };
}

async function checkAssertion({ jwt, publicJwk, audience }) {
  const key = await jose.importJWK(publicJwk, "ES256");
  const base = audience.replace(/\/+$/, "");
  const { payload } = await jose.jwtVerify(jwt, key, { audience: [base, `${base}/`], clockTolerance: 30 });
  return { ok: true, iss: payload.iss, sub: payload.sub };
}

let input = "";
for await (const chunk of process.stdin) input += chunk;
const request = JSON.parse(input);
const verdicts = { proofs: [], assertion: null };
for (const item of request.proofs) {
  try { verdicts.proofs.push(await checkProof(item)); }
  catch (error) { verdicts.proofs.push({ ok: false, error: String(error) }); }
}
try { verdicts.assertion = await checkAssertion(request.assertion); }
catch (error) { verdicts.assertion = { ok: false, error: String(error) }; }
process.stdout.write(JSON.stringify(verdicts));
