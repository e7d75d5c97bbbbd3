// The real authorization server of the OAuth end-to-end tests: the `oidc-provider` npm package
// (a certified OpenID provider, test-only, from tests/js) on 127.0.0.1.
//
//   MACHINE_CLIENT_SECRET=S node provider.mjs --port PORT --resource URL [--resource URL2 …]
//       --events FILE [--other-resource URL2] [--opaque-resource URL3] [--max-life-s N]
//       [--hub-redirect-uri URL …]   (with HUB_CLIENT_SECRET=S2 in the environment)
//
// Configured as an MCP authorization server for the protected resources given (the first is
// the default): open dynamic client registration, PKCE (S256, required), resource indicators
// (RFC 8707: only those resources; each one's access tokens are RFC 9068 JWTs with scopes
// mcp:read/mcp:write and that resource alone as their audience), refresh tokens
// with rotation (issued to every client allowed the grant), client credentials (client
// "machine", secret S, from the environment so no process listing shows it), DPoP, RFC 9207
// `iss` in the redirect (always on in oidc-provider), token introspection (RFC 7662, for any
// authenticated client), and the package's own development login
// and consent pages (any login and password are accepted). Several resources (--resource
// repeated, --other-resource, or added later by the control route), so the tests can prove a
// resource server refuses a token meant for another one. With --opaque-resource, one more
// resource URL3 gets opaque access tokens (oidc-provider introspects only those), for the
// introspection tests.
//
// Keys are generated per run; nothing is written but FILE, where every provider event the tests
// count (grants by type, refresh-token consumption, revocations and destroyed tokens,
// registrations) is appended as one JSON line. Control routes for the tests:
// POST /__test/settings?access_token_ttl=N sets the access-token lifetime of later grants
// (seconds); POST /__test/resources?resource=URL[&format=opaque] adds a protected resource (a
// server a test starts once the provider runs, e.g. `mcpkit serve`), whose access tokens are
// opaque with format=opaque (for introspection, which is on: any confidential client may
// introspect, oidc-provider's default policy).
//
// With --hub-redirect-uri, the provider is also an OpenID Connect provider for the mcpkit
// hub: one more pre-registered confidential client "hub" (secret S2 from the environment,
// client_secret_basic, the code grant back to those redirect URIs), and accounts with claims:
// the login typed is the subject, its preferred_username (profile scope) and
// LOGIN@example.test its email (email scope), put in the ID token itself
// (conformIdTokenClaims off, so the hub needs no userinfo call). A login starting with
// "noname" has neither claim (the hub then names the user after the subject).
//
// With --token-exchange (test-only: oidc-provider has no RFC 8693 grant of its own), the
// client "hub" may also use the token-exchange grant: it presents a user's access token from
// this provider (subject_token_type access_token; an opaque one is looked up, a JWT one
// verified with the provider's own keys; expired or unknown: invalid_grant) and gets a JWT
// access token for one configured `resource` (else invalid_target) for the same account,
// with that resource's scopes. Each success is recorded as `token_exchange.success`
// (client_id, account, resource). The hub's sign-ins then also get a refresh token (without
// offline_access), so the hub can refresh an expiring provider token first.
// Prints one JSON line with the issuer
// when it listens; exits when stdin closes (the test process is gone) or after --max-life-s.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

// tests/js holds the test-only JS packages (ESM resolves no NODE_PATH, hence the path)
import Provider, { errors } from '../js/node_modules/oidc-provider/lib/index.js';
import { createLocalJWKSet, jwtVerify } from '../js/node_modules/jose/dist/webapi/index.js';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    resource: { type: 'string', multiple: true },
    'other-resource': { type: 'string' },
    'opaque-resource': { type: 'string' },
    events: { type: 'string' },
    'max-life-s': { type: 'string', default: '900' },
    'hub-redirect-uri': { type: 'string', multiple: true },
    'token-exchange': { type: 'boolean', default: false },
  },
});
const hubRedirectUris = args['hub-redirect-uri'] ?? [];
const hubRedirectUri = hubRedirectUris.length > 0;
const issuer = `http://127.0.0.1:${args.port}`;
const settings = { accessTokenTTL: 3600 };
const opaqueResources = new Set([args['opaque-resource']].filter(Boolean)); // opaque tokens
const resources = new Set([...args.resource, args['other-resource'], ...opaqueResources]
  .filter(Boolean));
const MAX_RESOURCES = 64; // the control route adds at most this many

function signingKey(type, options, alg) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid: `${alg}-${randomBytes(4).toString('hex')}` };
}

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const hubClient = {
  client_id: 'hub',
  client_secret: process.env.HUB_CLIENT_SECRET,
  grant_types: ['authorization_code', 'refresh_token',
    ...(args['token-exchange'] ? [TOKEN_EXCHANGE] : [])],
  redirect_uris: hubRedirectUris,
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_basic',
};
// the hub's accounts: the login is the subject (see the header)
const hubAccounts = hubRedirectUri ? {
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], profile: ['preferred_username'], email: ['email'] },
  async findAccount(ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        if (sub.startsWith('noname')) return { sub };
        return { sub, preferred_username: sub, email: `${sub}@example.test` };
      },
    };
  },
} : {};

const signingKeys = [signingKey('ec', { namedCurve: 'P-256' }, 'ES256'), signingKey('rsa', { modulusLength: 2048 }, 'RS256')];
const PRIVATE_MEMBERS = new Set(['d', 'p', 'q', 'dp', 'dq', 'qi']);
const publicKeys = createLocalJWKSet({
  keys: signingKeys.map((key) => Object.fromEntries(
    Object.entries(key).filter(([member]) => !PRIVATE_MEMBERS.has(member)))),
});

function resourceServerInfo(indicator) {
  return {
    scope: 'mcp:read mcp:write',
    audience: indicator,
    accessTokenTTL: settings.accessTokenTTL,
    ...(opaqueResources.has(indicator)
      ? { accessTokenFormat: 'opaque' }
      : { accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } }),
  };
}

const provider = new Provider(issuer, {
  ...hubAccounts,
  clients: [{
    client_id: 'machine',
    client_secret: process.env.MACHINE_CLIENT_SECRET,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  }, ...(hubRedirectUri ? [hubClient] : [])],
  jwks: { keys: signingKeys },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // the resources' scopes are listed too: a client may name them in its registration (the
  // official Python SDK registers with the scope it will ask for)
  scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:write'],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  // issueRefreshToken is oidc-provider's default rule: a refresh token only for a grant with
  // offline_access, which it keeps only with prompt=consent (OpenID Connect Core §11). mcpkit
  // sends both, so the refresh tests prove it. With --token-exchange the hub's sign-ins get
  // one too (so the hub can refresh an expiring provider token before exchanging it).
  issueRefreshToken: async (ctx, client, code) => client.grantTypeAllowed('refresh_token')
    && (code.scopes.has('offline_access') || (args['token-exchange'] && client.clientId === 'hub')),
  ttl: { RefreshToken: 3600, Session: 3600, Grant: 3600, Interaction: 600 },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    dPoP: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => args.resource[0],
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator) {
        if (!indicator || !resources.has(indicator)) throw new errors.InvalidTarget();
        return resourceServerInfo(indicator);
      },
    },
  },
});

// --- what the tests count -----------------------------------------------------------------
function record(event, fields) {
  appendFileSync(args.events, `${JSON.stringify({ event, ...fields })}\n`);
}
const fromCtx = (ctx) => ({
  grant_type: ctx?.oidc?.params?.grant_type,
  client_id: ctx?.oidc?.client?.clientId,
});
provider.on('grant.success', (ctx) => record('grant.success', fromCtx(ctx)));
provider.on('grant.error', (ctx, err) => record('grant.error', { ...fromCtx(ctx), error: err.error }));
provider.on('grant.revoked', (ctx, grantId) => record('grant.revoked', { ...fromCtx(ctx), grant_id: grantId }));
provider.on('refresh_token.consumed', (token) => record('refresh_token.consumed', { client_id: token.clientId, grant_id: token.grantId }));
// revocation (a logout) destroys the token; the grant's other tokens go with grant.revoked
for (const kind of ['access_token', 'refresh_token', 'client_credentials']) {
  provider.on(`${kind}.destroyed`, (token) => record(`${kind}.destroyed`, { client_id: token.clientId, grant_id: token.grantId }));
}
provider.on('registration_create.success', (ctx, client) => record('registration_create.success', { client_id: client.clientId }));
provider.on('authorization.success', (ctx) => record('authorization.success', { client_id: ctx.oidc.client?.clientId, scope: ctx.oidc.params.scope }));
provider.on('server_error', (ctx, err) => record('server_error', { message: String(err) }));

// --- RFC 8693 token exchange for the hub (--token-exchange; see the header) ----------------
async function subjectAccount(value) {
  if (typeof value !== 'string' || value.length > 16384) return undefined;
  const stored = await provider.AccessToken.find(value); // opaque tokens are stored
  if (stored) return stored.isExpired ? undefined : stored.accountId;
  try { // a JWT access token: signed by this provider, for some resource, not expired
    const { payload } = await jwtVerify(value, publicKeys, { issuer, typ: 'at+jwt' });
    return typeof payload.sub === 'string' ? payload.sub : undefined;
  } catch {
    return undefined;
  }
}

async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  if (client.clientId !== 'hub') throw new errors.UnauthorizedClient('only the hub exchanges tokens');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  const accountId = await subjectAccount(params.subject_token);
  if (!accountId) throw new errors.InvalidGrant('subject_token is invalid or expired');
  const { resource } = params;
  if (typeof resource !== 'string' || !resources.has(resource)) throw new errors.InvalidTarget();
  const info = resourceServerInfo(resource);
  const token = new provider.AccessToken({ accountId, client, gty: 'token_exchange', scope: info.scope });
  token.resourceServer = new provider.ResourceServer(resource, info);
  const value = await token.save();
  record('token_exchange.success', { client_id: client.clientId, account: accountId, resource });
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}
if (args['token-exchange']) {
  provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, new Set(['subject_token',
    'subject_token_type', 'requested_token_type', 'resource', 'scope', 'audience']));
}

// --- serving ------------------------------------------------------------------------------
const handle = provider.callback();
const server = createServer((req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname === '/__test/settings' && req.method === 'POST') {
    const ttl = Number(url.searchParams.get('access_token_ttl'));
    if (!Number.isInteger(ttl) || ttl < 1) {
      res.writeHead(400).end('access_token_ttl must be a positive integer');
      return;
    }
    settings.accessTokenTTL = ttl;
    res.writeHead(204).end();
    return;
  }
  if (url.pathname === '/__test/resources' && req.method === 'POST') {
    const resource = url.searchParams.get('resource');
    if (!resource?.startsWith('http://127.0.0.1:') || resources.size >= MAX_RESOURCES) {
      res.writeHead(400).end(`resource must be an http://127.0.0.1: URL, at most ${MAX_RESOURCES}`);
      return;
    }
    resources.add(resource);
    if (url.searchParams.get('format') === 'opaque') opaqueResources.add(resource);
    res.writeHead(204).end();
    return;
  }
  handle(req, res);
});
server.listen(Number(args.port), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ ready: true, issuer })}\n`);
});
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
setTimeout(() => process.exit(0), Number(args['max-life-s']) * 1000).unref();
