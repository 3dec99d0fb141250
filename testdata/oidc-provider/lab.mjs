// A lab's OpenID Connect provider: node-oidc-provider (OpenID Certified),
// configured as a lab that runs its own would: one confidential client
// (the portal) with its redirect and post-logout URIs registered, PKCE
// required, signing keys of its own, the lab's accounts with their groups
// and Unix account, a login page of the lab's, consent taken as given for
// the lab's own portal, RP-initiated logout with its confirmation page.
// The ID token carries only what the code flow's ID token must
// (conformIdTokenClaims, the default): names and groups come from
// userinfo.
//
//   node lab.mjs --users users.json --client-id ID --client-secret SECRET \
//     --redirect-uri URI --post-logout-uri URI [--port N]
//
// It prints "oidc-provider issuer URL" on stdout once it listens, and a
// line per request on stderr ("path=/auth status=303").
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

const { values: opt } = parseArgs({
  options: {
    users: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'redirect-uri': { type: 'string' },
    'post-logout-uri': { type: 'string' },
    port: { type: 'string', default: '0' },
  },
});
for (const k of ['users', 'client-id', 'client-secret', 'redirect-uri', 'post-logout-uri']) {
  if (!opt[k]) {
    console.error(`lab.mjs: --${k} is required`);
    process.exit(2);
  }
}

// users.json: [{id, username, password, email, groups, unix_name}]
const people = JSON.parse(fs.readFileSync(opt.users, 'utf8'));
const byID = new Map(people.map((p) => [p.id, p]));

const server = http.createServer();
await new Promise((resolve) => server.listen(Number(opt.port), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const signing = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

const provider = new Provider(issuer, {
  clients: [{
    client_id: opt['client-id'],
    client_secret: opt['client-secret'],
    client_name: 'GPU portal',
    redirect_uris: [opt['redirect-uri']],
    post_logout_redirect_uris: [opt['post-logout-uri']],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  jwks: { keys: [{ ...signing, kid: 'lab-1', use: 'sig', alg: 'RS256' }] },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username', 'unix_name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(_ctx, id) {
    const p = byID.get(id);
    if (!p) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id, name: p.username, preferred_username: p.username,
          email: p.email, email_verified: true, groups: p.groups ?? [],
          ...(p.unix_name ? { unix_name: p.unix_name } : {}),
        };
      },
    };
  },
  ttl: {
    AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600,
  },
  renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = `<!doctype html><title>Sign-in error</title><h1>Sign-in error</h1><p id="error">${esc(out.error)}: ${esc(out.error_description ?? '')}</p>`;
  },
});

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function loginPage(res, uid, client, message) {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Lab sign-in</title></head>
<body><main>
<h1>Sign in to ${esc(client)}</h1>
${message ? `<p id="error" role="alert">${esc(message)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
<label>User name <input id="username" name="username" required autofocus></label>
<label>Password <input id="password" name="password" type="password" required></label>
<button type="submit">Sign in</button>
</form>
</main></body></html>`);
}

async function form(req) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 10000) throw new Error('form too large');
  }
  return new URLSearchParams(body);
}

// interaction serves the lab's login page and takes consent for the
// portal, the lab's own client, as given.
async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    res.writeHead(400).end('interaction mismatch');
    return;
  }
  const { prompt, params, session } = details;
  const client = await provider.Client.find(params.client_id);
  if (prompt.name === 'login') {
    if (action !== 'login' || req.method !== 'POST') {
      loginPage(res, uid, client?.clientName ?? params.client_id, '');
      return;
    }
    const f = await form(req);
    const p = people.find((x) => x.username === f.get('username'));
    const ok = p && crypto.timingSafeEqual(
      crypto.createHash('sha256').update(p.password).digest(),
      crypto.createHash('sha256').update(f.get('password') ?? '').digest());
    if (!ok) {
      loginPage(res, uid, client?.clientName ?? params.client_id, 'Wrong user name or password.');
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: p.id } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  res.writeHead(400).end(`unknown prompt ${prompt.name}`);
}

const oidc = provider.callback();
server.on('request', (req, res) => {
  const path = new URL(req.url, issuer).pathname;
  res.on('finish', () => console.error(`method=${req.method} path=${path} status=${res.statusCode}`));
  const m = path.match(/^\/interaction\/([\w-]+)(?:\/(login))?$/);
  if (!m) {
    oidc(req, res);
    return;
  }
  interaction(req, res, m[1], m[2]).catch((err) => {
    console.error(`interaction: ${err}`);
    if (!res.headersSent) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`This sign-in cannot go on: ${err.message}`);
    }
  });
});

console.log(`oidc-provider issuer ${issuer}`);
