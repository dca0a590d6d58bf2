// Offline test of the CDK app: synthesizes the stack without building Rust and checks that it is template.yaml,
// included: every section as template.yaml has it, each parameter replaced by its prop (or default), the code and
// the state machine's definition as assets; the props checked against the parameters; cdk-nag's AwsSolutions pack.
// Run: `npx tsc && node --test dist/test/` (scripts/check-infra).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { strict as assert } from 'node:assert';
import { after, describe, test } from 'node:test';
import { App, Aspects, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import type { Asset } from 'aws-cdk-lib/aws-s3-assets';
import { AwsSolutionsChecks } from 'cdk-nag';
import { propsFromContext } from '../lib/context';
import {
  StackSyncStack,
  findWorkspaceRoot,
  propName,
  templateFunctions,
  type ParameterValue,
  type StackSyncParameters,
  type StackSyncProps,
} from '../lib/stacksync-stack';
import { loadTemplate, type CfnTemplate } from '../lib/template';

const INFRA = path.resolve(__dirname, '..', '..');
const ROOT = findWorkspaceRoot(__dirname);
const CDK_CONTEXT = JSON.parse(fs.readFileSync(path.join(INFRA, 'cdk.json'), 'utf8')).context as Record<string, unknown>;
const TEMPLATE = loadTemplate(path.join(ROOT, 'template.yaml'));
const FUNCTIONS = templateFunctions(TEMPLATE);

// A stand-in `cargo` first on PATH, installed before any synthesis (cargo-lambda-cdk probes `cargo lambda
// --version` once per process). It logs every call and answers like cargo-lambda: `lambda build` writes a stub
// bootstrap into --lambda-dir. So the test proves that bundling is skipped even where the real cargo-lambda is
// installed, and it can check the build command a real `cdk synth` runs.
const SHIM = fs.mkdtempSync(path.join(os.tmpdir(), 'stacksync-infra-test-'));
const CARGO_LOG = path.join(SHIM, 'cargo.log');
fs.writeFileSync(
  path.join(SHIM, 'cargo'),
  `#!/usr/bin/env bash
printf '%s\\n' "$*" >> '${CARGO_LOG}'
case "$1 \${2:-}" in
  "lambda --version") echo "cargo-lambda 0.0.0 (stacksync test stand-in)" ;;
  "lambda build")
    while [ $# -gt 0 ]; do
      if [ "$1" = --lambda-dir ]; then mkdir -p "$2" && printf stub > "$2/bootstrap"; fi
      shift
    done ;;
  *) exit 1 ;;
esac
`,
  { mode: 0o755 },
);
process.env.PATH = `${SHIM}${path.delimiter}${process.env.PATH ?? ''}`;
after(() => fs.rmSync(SHIM, { recursive: true, force: true }));
const cargoCalls = (): string[] =>
  fs.existsSync(CARGO_LOG) ? fs.readFileSync(CARGO_LOG, 'utf8').split('\n').filter((l) => l !== '') : [];

interface Synth {
  app: App;
  stack: StackSyncStack;
  template: Template;
  json: CfnTemplate;
}

/** An app that bundles nothing (`cdk synth` would build the functions). */
const offline = () => new App({ context: { 'aws:cdk:bundling-stacks': [] } });

/** The stack as `cdk synth` makes it (cdk.json's feature flags, cdk-nag), but with bundling skipped unless `bundle`. */
function synth(props: StackSyncProps = {}, bundle = false): Synth {
  const context: Record<string, unknown> = { ...CDK_CONTEXT };
  if (!bundle) context['aws:cdk:bundling-stacks'] = [];
  const app = new App({ context });
  const stack = new StackSyncStack(app, 'StackSyncTest', props);
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  const template = Template.fromStack(stack);
  return { app, stack, template, json: template.toJSON() as CfnTemplate };
}

/** Every parameter's prop, none at its default: the typed props cover template.yaml's parameters (checked below). */
const FULL: Required<StackSyncParameters> = {
  architecture: 'arm64',
  stackNamePrefix: 'prod-',
  cloudFormationRoleArns: ['arn:aws:iam::111122223333:role/cfn-exec', 'arn:aws:iam::111122223333:role/cfn-exec-2'],
  requireRoleArn: false,
  targetAccountRoleArns: ['arn:aws:iam::444455556666:role/stacksync'],
  fleetRoleName: 'stacksync-baseline',
  organizationsRoleArn: 'arn:aws:iam::999988887777:role/stacksync-organizations-read',
  webhookSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/webhook-AbCdEf',
  logRetentionDays: 90,
  scheduleExpression: 'rate(2 minutes)',
  maxStartsPerRun: 200,
  maxDriftDetections: 25,
  driftReadPolicy: 'job-function/ViewOnlyAccess',
  approvers: ['arn:aws:iam::111122223333:role/release-managers', 'arn:aws:iam::111122223333:user/ops-*'],
  alarmTopicArn: 'arn:aws:sns:eu-west-1:111122223333:ops-alerts',
  eventBusName: 'ops',
  notificationTopicArn: 'arn:aws:sns:eu-west-1:111122223333:ops-notices',
  sourceBucketNames: ['acme-stacksync-sources', 'acme-other-sources'],
  sourceSecretArns: ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/*'],
  sourceParameterArns: ['arn:aws:ssm:eu-west-1:111122223333:parameter/stacksync/git-password'],
  valueSecretArns: ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/db-password-AbCdEf'],
  valueParameterArns: ['arn:aws:ssm:eu-west-1:111122223333:parameter/app/*'],
  codeCommitRepositoryArns: ['arn:aws:codecommit:eu-west-1:111122223333:infra-*'],
  webhookReservedConcurrency: 0,
  eventsReservedConcurrency: 2,
  registrySourceUrl: 'https://github.com/acme/platform.git',
  registrySourceName: 'platform',
  registrySourceRef: 'release',
  registrySourcePath: 'stacks/**/*.yaml',
  registrySourceCredentialsArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/platform-AbCdEf',
  previewForks: true,
  policySource: '{git: "https://github.com/acme/policies.git", ref: v3, path: guard}',
  syncWindows: '[{"deny": "0 0 24 12 *", "duration": "3d", "timeZone": "Europe/Berlin"}]',
  maxRunsPerAccount: 20,
  publishParameterPath: '/stacksync/outputs/',
};
/** The installation the IAM conformance test (../tests/tests/iam.rs) holds the recorded calls against. */
const FIXTURE = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'fixtures', 'iam', 'installation.json'), 'utf8'));
const FIXTURE_PROPS: StackSyncParameters = Object.fromEntries(
  Object.entries(FIXTURE).filter(([key]) => Object.keys(TEMPLATE.Parameters ?? {}).map(propName).includes(key)),
);

// Synthesized once, on first use. A synthesis fails on an unsuppressed cdk-nag error or CDK template validation
// error (cdk.json: annotationsInValidationReport, validateAgainstDefaultRules), and then each test that uses it
// fails with the findings.
function once<T>(make: () => T): () => T {
  let value: { ok: T } | { err: unknown } | undefined;
  return () => {
    value ??= (() => {
      try {
        return { ok: make() };
      } catch (err) {
        return { err };
      }
    })();
    if ('err' in value) throw value.err;
    return value.ok;
  };
}
const lazyDefaults = once(() => synth());
const lazyFull = once(() => synth(FULL));
const lazyFixture = once(() => synth(FIXTURE_PROPS));

/** `value` (a part of template.yaml) with each parameter's `Ref` and `${Name}` replaced by its value, as CfnInclude replaces them. */
function substitute(value: unknown, parameters: Record<string, ParameterValue>): unknown {
  if (Array.isArray(value)) return value.map((v) => substitute(v, parameters));
  if (value === null || typeof value !== 'object') return value;
  const o = value as Record<string, unknown>;
  if (typeof o.Ref === 'string' && o.Ref in parameters) return parameters[o.Ref];
  if (o['Fn::Sub'] !== undefined) {
    const sub = (text: string) => text.replace(/\$\{([A-Za-z0-9]+)\}/g, (all, name: string) => (name in parameters ? String(parameters[name]) : all));
    const args = o['Fn::Sub'];
    return { 'Fn::Sub': typeof args === 'string' ? sub(args) : [sub((args as [string])[0]), substitute((args as unknown[])[1], parameters)] };
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, substitute(v, parameters)]));
}

/** An asset's S3 location in the synthesis (the CDK bootstrap's bucket, the asset's hash as the key). */
function isAssetLocation(value: unknown): boolean {
  const v = value as { Bucket?: unknown; Key?: unknown };
  return (
    JSON.stringify(v?.Bucket) === JSON.stringify({ 'Fn::Sub': 'cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}' }) &&
    typeof v?.Key === 'string' &&
    /^[0-9a-f]{64}\.(zip|json)$/.test(v.Key)
  );
}

/**
 * `value` with each whole number written as text (`"30"`) as a number: a value CloudFormation reads as either, and that
 * an included L1 property of a number type holds as a number (a parameter's value is text).
 */
function numbersAsNumbers(value: unknown): unknown {
  if (typeof value === 'string' && /^(0|[1-9][0-9]*)$/.test(value)) return Number(value);
  if (Array.isArray(value)) return value.map(numbersAsNumbers);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, numbersAsNumbers(v)]));
}

/** Where `actual` and `expected` differ, by path (`Resources.X.Properties.Y`). */
function differences(actual: unknown, expected: unknown, at = ''): string[] {
  if (JSON.stringify(actual) === JSON.stringify(expected)) return [];
  if (actual && expected && typeof actual === 'object' && typeof expected === 'object' && Array.isArray(actual) === Array.isArray(expected)) {
    const keys = new Set([...Object.keys(actual), ...Object.keys(expected)]);
    return [...keys].flatMap((k) => differences((actual as any)[k], (expected as any)[k], at === '' ? k : `${at}.${k}`));
  }
  return [`${at}: ${JSON.stringify(actual)} (template.yaml: ${JSON.stringify(expected)})`];
}

/**
 * The synthesis as template.yaml would be with these values: the code and definition locations set aside (checked
 * to be assets), cdk-nag's suppressions (checked below) and CDK's own parameter and rule (the bootstrap version) left out.
 */
function asTemplateYaml(s: Synth): CfnTemplate {
  const json = structuredClone(s.json) as Record<string, any>;
  for (const [id, r] of Object.entries<any>(json.Resources)) {
    if (r.Metadata?.cdk_nag !== undefined) {
      delete r.Metadata.cdk_nag;
      if (Object.keys(r.Metadata).length === 0) delete r.Metadata;
    }
    for (const [uri, source] of [
      ['CodeUri', TEMPLATE.Resources[id]?.Properties?.CodeUri],
      ['DefinitionUri', TEMPLATE.Resources[id]?.Properties?.DefinitionUri],
    ]) {
      if (source === undefined) continue;
      assert.ok(isAssetLocation(r.Properties[uri]), `${id}.${uri} is an asset: ${JSON.stringify(r.Properties[uri])}`);
      r.Properties[uri] = source;
    }
  }
  // What CDK adds of its own: the bootstrap version check.
  assert.deepEqual(Object.keys(json.Parameters), ['BootstrapVersion']);
  assert.deepEqual(Object.keys(json.Rules), ['CheckBootstrapVersion']);
  delete json.Parameters;
  delete json.Rules;
  return json as CfnTemplate;
}

describe('template.yaml, included', () => {
  test('template.yaml is read as CloudFormation reads it: every short form in its long form', () => {
    assert.deepEqual(TEMPLATE.Resources.ArtifactFetchFunction.Properties.Policies[0].Statement[0].Resource, { 'Fn::GetAtt': ['RegistryTable', 'Arn'] });
    assert.deepEqual(TEMPLATE.Outputs?.StateMachineArn.Value, { Ref: 'ReconcileStateMachine' });
    assert.deepEqual((TEMPLATE.Conditions as any).NotifiesTopic, {
      'Fn::And': [{ Condition: 'SendsEvents' }, { 'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'NotificationTopicArn' }, ''] }] }],
    });
    assert.equal(TEMPLATE.Transform, 'AWS::Serverless-2016-10-31');
    assert.equal(FUNCTIONS.length, 13);
  });

  for (const [name, props, make] of [
    ['no props: each parameter its default', {}, lazyDefaults],
    ['every prop', FULL, lazyFull],
    ["the IAM conformance test's installation", FIXTURE_PROPS, lazyFixture],
  ] as const) {
    test(`${name}: the synthesis is template.yaml, each parameter replaced by its value, the code and the definition as assets`, () => {
      const s = make();
      const values = s.stack.parameterValues;
      const expected = Object.fromEntries(
        Object.entries(TEMPLATE)
          .filter(([section]) => section !== 'Parameters')
          .map(([section, body]) => [section, substitute(body, values)]),
      );
      assert.deepEqual(differences(numbersAsNumbers(asTemplateYaml(s)), numbersAsNumbers(expected)), []);
      // Each value is the prop, or the parameter's default.
      for (const [parameter, declaration] of Object.entries(TEMPLATE.Parameters ?? {})) {
        const prop = (props as Record<string, unknown>)[propName(parameter)];
        const want =
          prop === undefined
            ? declaration.Type === 'CommaDelimitedList'
              ? String(declaration.Default).split(',')
              : String(declaration.Default)
            : Array.isArray(prop)
              ? prop
              : String(prop);
        assert.deepEqual(values[parameter], want, parameter);
      }
    });
  }

  test("every parameter of template.yaml is a typed prop, of the parameter's type", () => {
    const parameters = TEMPLATE.Parameters ?? {};
    assert.deepEqual(Object.keys(FULL).sort(), Object.keys(parameters).map(propName).sort());
    for (const [parameter, declaration] of Object.entries(parameters)) {
      const prop = FULL[propName(parameter) as keyof StackSyncParameters];
      const kind = { CommaDelimitedList: 'object', Number: 'number', String: ['RequireRoleArn', 'PreviewForks'].includes(parameter) ? 'boolean' : 'string' }[declaration.Type];
      assert.equal(typeof prop, kind, parameter);
    }
  });

  test("an empty list is CloudFormation's empty CommaDelimitedList (`[\"\"]`), and stackNamePrefix '' is any stack", () => {
    const s = synth({ stackNamePrefix: '', approvers: [] });
    assert.deepEqual(s.stack.parameterValues.Approvers, ['']);
    assert.equal(s.stack.parameterValues.StackNamePrefix, '');
    assert.deepEqual((s.json.Conditions as any).AnyStackName, { 'Fn::Equals': ['', ''] });
  });

  test('the typed handles are the included resources', () => {
    const s = lazyDefaults();
    const resolve = (v: unknown) => Stack.of(s.stack).resolve(v);
    assert.deepEqual(resolve(s.stack.table.tableName), { Ref: 'RegistryTable' });
    assert.deepEqual(resolve(s.stack.bucket.bucketName), { Ref: 'ArtifactBucket' });
    assert.deepEqual(resolve(s.stack.bucket.bucketArn), { 'Fn::GetAtt': ['ArtifactBucket', 'Arn'] });
    assert.deepEqual(resolve(s.stack.stateMachine.stateMachineArn), { Ref: 'ReconcileStateMachine' });
    assert.deepEqual(resolve(s.stack.webhookUrl), { 'Fn::GetAtt': ['WebhookFunctionUrl', 'FunctionUrl'] });
    assert.deepEqual(resolve(s.stack.answerUrl), { 'Fn::GetAtt': ['AnswerFunctionUrl', 'FunctionUrl'] });
    assert.deepEqual(Object.keys(s.stack.functions), FUNCTIONS.map((f) => f.logicalId.replace(/Function$/, '')));
    for (const { logicalId } of FUNCTIONS) {
      const key = logicalId.replace(/Function$/, '');
      assert.deepEqual(resolve(s.stack.functions[key].functionArn), { 'Fn::GetAtt': [logicalId, 'Arn'] });
      assert.equal(s.stack.samFunctions[key], s.stack.template.getResource(logicalId));
    }
  });
});

describe('props', () => {
  test("bad props are refused with the parameter's constraint (template.yaml's AllowedPattern, AllowedValues, MinValue, MaxValue)", () => {
    const refused: [StackSyncParameters, RegExp][] = [
      [{ maxStartsPerRun: 0 }, /maxStartsPerRun 0: at least 1 \(template.yaml's MaxStartsPerRun\)/],
      [{ maxStartsPerRun: 1001 }, /maxStartsPerRun 1001: at most 1000/],
      [{ maxStartsPerRun: 1.5 }, /maxStartsPerRun 1.5: a whole number/],
      [{ maxDriftDetections: 101 }, /maxDriftDetections 101: at most 100/],
      [{ webhookReservedConcurrency: -1 }, /webhookReservedConcurrency -1: at least 0/],
      [{ logRetentionDays: 31 }, /logRetentionDays 31: one of 1, 3, 5/],
      [{ architecture: 'x86' as never }, /architecture "x86": one of x86_64, arm64/],
      [{ requireRoleArn: 'yes' as never }, /requireRoleArn "yes": one of true, false/],
      [{ scheduleExpression: 'every 5 minutes' }, /scheduleExpression "every 5 minutes": does not match/],
      [{ stackNamePrefix: 'prod_' }, /stackNamePrefix "prod_": does not match/],
      [{ driftReadPolicy: 'Security Audit' }, /driftReadPolicy "Security Audit": does not match/],
      [{ eventBusName: 'my bus' }, /eventBusName "my bus": does not match/],
      // The full ARN, with the six characters Secrets Manager appends.
      [{ webhookSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/webhook' }, /webhookSecretArn .*: does not match/],
      [{ alarmTopicArn: 'ops-alerts' }, /alarmTopicArn "ops-alerts": does not match/],
      [{ approvers: ['arn:aws:iam::111122223333:group/ops'] }, /approvers "arn:aws:iam::111122223333:group\/ops": does not match/],
      [{ sourceSecretArns: ['arn:aws:ssm:eu-west-1:111122223333:parameter/x'] }, /sourceSecretArns .*: does not match/],
      [{ valueParameterArns: ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:x'] }, /valueParameterArns .*: does not match/],
      [{ codeCommitRepositoryArns: ['infra'] }, /codeCommitRepositoryArns "infra": does not match/],
      [{ approvers: 'arn:aws:iam::111122223333:role/x' as never }, /approvers .*: a list/],
      [{ targetAccountRoleArns: ['arn:aws:iam::444455556666:role/a,arn:aws:iam::444455556666:role/b'] }, /an element of a list holds no comma/],
      // The lists template.yaml has no AllowedPattern for.
      [{ cloudFormationRoleArns: ['arn:aws:iam::111122223333:role/*'] }, /cloudFormationRoleArns .*: not an IAM role ARN, no wildcards/],
      [{ targetAccountRoleArns: ['arn:aws:iam::444455556666:user/x'] }, /targetAccountRoleArns .*: not an IAM role ARN/],
      [{ sourceBucketNames: ['Acme_Sources'] }, /sourceBucketNames "Acme_Sources": not an S3 bucket name/],
    ];
    for (const [props, message] of refused) {
      assert.throws(() => new StackSyncStack(offline(), 'Refused', props), message, JSON.stringify(props));
    }
    // Partitions other than aws, and IAM wildcards in the names of the private sources and the stacks' parameters.
    new StackSyncStack(offline(), 'Accepted', {
      sourceSecretArns: ['arn:aws-cn:secretsmanager:cn-north-1:111122223333:secret:git-token-??????'],
      sourceParameterArns: ['arn:aws-us-gov:ssm:us-gov-west-1:111122223333:parameter/stacksync/git/*'],
      valueSecretArns: ['arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:app/*'],
      cloudFormationRoleArns: ['arn:aws-cn:iam::111122223333:role/path/cfn-exec'],
    });
  });

  test("props from the CDK context, one key per parameter: lists as JSON arrays or comma-separated, numbers, true or false", () => {
    const context = {
      stackNamePrefix: ' prod- ',
      requireRoleArn: 'false',
      cloudFormationRoleArns: `${FULL.cloudFormationRoleArns[0]}, ${FULL.cloudFormationRoleArns[1]}`,
      targetAccountRoleArns: FULL.targetAccountRoleArns,
      logRetentionDays: '90',
      maxDriftDetections: 25,
      approvers: ` ${FULL.approvers[0]},${FULL.approvers[1]} `,
      eventsReservedConcurrency: '0',
      stackName: 'not a parameter',
    };
    assert.deepEqual(propsFromContext(new App({ context }).node, TEMPLATE), {
      stackNamePrefix: 'prod-',
      requireRoleArn: false,
      cloudFormationRoleArns: FULL.cloudFormationRoleArns,
      targetAccountRoleArns: FULL.targetAccountRoleArns,
      logRetentionDays: 90,
      maxDriftDetections: 25,
      approvers: FULL.approvers,
      eventsReservedConcurrency: 0,
    });
    assert.deepEqual(propsFromContext(new App().node, TEMPLATE), {});
    assert.deepEqual(propsFromContext(new App({ context: { stackNamePrefix: '' } }).node, TEMPLATE), { stackNamePrefix: '' });
    assert.throws(
      () => new StackSyncStack(offline(), 'Refused', propsFromContext(new App({ context: { requireRoleArn: 'yes' } }).node, TEMPLATE)),
      /requireRoleArn "yes": one of true, false/,
    );
  });
});

describe('code and definition', () => {
  test('cargo-lambda bundling is skipped offline: no `cargo lambda build`, though cargo-lambda answers; the code is still an asset', () => {
    const before = cargoCalls().length;
    const s = synth(FULL);
    assert.equal(s.stack.bundlingRequired, false);
    // The stand-in answered the probe (once per process), so a bundling attempt would have run `cargo lambda build` locally.
    assert.equal(cargoCalls()[0], 'lambda --version');
    assert.deepEqual(cargoCalls().slice(before).filter((c) => c.startsWith('lambda build')), [], 'no cargo lambda build while aws:cdk:bundling-stacks is []');
    assert.equal(FUNCTIONS.length, 13);
    for (const { logicalId } of FUNCTIONS) assert.ok(isAssetLocation(s.json.Resources[logicalId].Properties.CodeUri), logicalId);
  });

  test("a real synth (bundling on) builds each template function's binary with cargo lambda, for the architecture, in the release profile", () => {
    const before = cargoCalls().length;
    const s = synth({ architecture: 'arm64' }, true);
    assert.equal(s.stack.bundlingRequired, true);
    assert.deepEqual((s.json.Globals as any).Function.Architectures, ['arm64']);
    const builds = cargoCalls()
      .slice(before)
      .filter((c) => c.startsWith('lambda build'));
    assert.equal(builds.length, FUNCTIONS.length);
    const keys = new Set<string>();
    for (const { logicalId, binary } of FUNCTIONS) {
      const build = builds.find((b) => b.includes(` --bin ${binary} `));
      assert.ok(build, `cargo lambda build --bin ${binary}`);
      assert.match(build, / --release /);
      assert.match(build, / --arm64 /);
      assert.match(build, new RegExp(` --flatten ${binary}$`));
      keys.add(s.json.Resources[logicalId].Properties.CodeUri.Key);
    }
    assert.equal(keys.size, 1, 'the stand-in builds the same stub for each, so one asset');
  });

  test("the state machine's definition is an asset of the ASL file template.yaml names", () => {
    const s = lazyDefaults();
    const asset = s.stack.node.findChild('ReconcileStateMachineDefinition') as Asset;
    const staged = path.join(s.app.outdir, asset.assetPath);
    assert.equal(fs.readFileSync(staged, 'utf8'), fs.readFileSync(path.join(ROOT, TEMPLATE.Resources.ReconcileStateMachine.Properties.DefinitionUri), 'utf8'));
    assert.equal(s.json.Resources.ReconcileStateMachine.Properties.DefinitionUri.Key, `${asset.assetHash}.json`);
  });
});

describe('IAM conformance', () => {
  // The Rust test tests/tests/iam.rs holds every AWS call the integration suite recorded against each function's
  // role in this synthesis (and in template.yaml): the installation of tests/fixtures/iam/installation.json.
  test('the synthesis for the IAM conformance test is written to dist/conformance.template.json', () => {
    const s = lazyFixture();
    for (const key of Object.keys(FIXTURE_PROPS)) assert.ok(key in FIXTURE, key);
    assert.ok(Object.keys(FIXTURE_PROPS).length >= 10, 'the fixture names the optional grants');
    const out = path.join(INFRA, 'dist', 'conformance.template.json');
    fs.writeFileSync(out, `${JSON.stringify(s.json, null, 1)}\n`);
    for (const { logicalId, binary } of FUNCTIONS) {
      const fn = s.json.Resources[logicalId];
      assert.equal(fn.Type, 'AWS::Serverless::Function');
      assert.equal(fn.Metadata?.BuildProperties?.Binary, binary);
      assert.ok(fn.Properties.Policies.some((p: any) => Array.isArray(p.Statement)), `${logicalId}: an inline policy`);
    }
  });
});

describe('checks', () => {
  test('cdk-nag: no unsuppressed AwsSolutions error or warning, every suppression with a specific reason', () => {
    for (const s of [lazyDefaults(), lazyFull()]) {
      const annotations = Annotations.fromStack(s.stack);
      assert.deepEqual(annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')), []);
      assert.deepEqual(annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')), []);
      const suppressions = Object.values(s.json.Resources).flatMap((r) => r.Metadata?.cdk_nag?.rules_to_suppress ?? []);
      assert.ok(suppressions.length >= 2);
      for (const { id, reason, applies_to } of suppressions) {
        assert.ok(reason.length >= 80, `${id}: ${reason}`);
        if (id === 'AwsSolutions-IAM5') assert.ok(applies_to?.length > 0, `${id} names its findings`);
      }
    }
  });

  test("CDK's template validation (on, cdk.json) is acknowledged only where the included template makes it so, each with its reason", () => {
    assert.equal(CDK_CONTEXT['@aws-cdk/core:validateAgainstDefaultRules'], true);
    const s = lazyDefaults();
    const acknowledged = (scope: { node: { metadata: { type: string; data: unknown }[] } }) =>
      scope.node.metadata.filter((m) => m.type === 'aws:cdk:acknowledged-rules').flatMap((m) => Object.entries(m.data as Record<string, string>));
    const stackWide = acknowledged(s.stack);
    assert.deepEqual(stackWide.map(([id]) => id).sort(), [
      'CloudFormation-Validate::F1020', // a GetAtt of a resource SAM makes (<Function>Role, <Function>Url)
      'CloudFormation-Validate::F6101', // an output naming one
      'CloudFormation-Validate::W8003', // a condition on a parameter, constant once the parameter is replaced
      'CloudFormation-Validate::W9053', // two such conditions alike
    ]);
    for (const [id, reason] of stackWide) assert.ok(reason.length >= 80, `${id}: ${reason}`);
    // An empty value (an alarm's topic, ...) only in a resource made on a condition, which then does not hold.
    for (const [logicalId, r] of Object.entries(TEMPLATE.Resources)) {
      const ids = acknowledged(s.stack.template.getResource(logicalId)).map(([id]) => id);
      assert.deepEqual(ids, r.Condition === undefined ? [] : ['CloudFormation-Validate::F3033'], logicalId);
    }
  });

  test("the webhook's unreadable-secret filter (template.yaml) matches its ERROR refusal lines, and no WARN line", () => {
    // CloudWatch Logs regex (between %…%): no spaces or quotes are allowed in it, so `.` stands for a space; `^`
    // anchors at the start of the event. The lines are what the webhook writes (shared/src/lambda.rs: the
    // tracing-subscriber text format without time or colours; the Lambda runtime's `Lambda runtime invoke` span),
    // captured from that formatter: the level first, padded to five (` WARN`).
    const pattern = lazyFull().json.Resources.WebhookSecretUnreadableMetric.Properties.FilterPattern as string;
    const regex = pattern.match(/^%(.*)%$/)?.[1];
    assert.ok(regex, 'a regex pattern');
    assert.match(regex, /^[A-Za-z0-9:_#=@/;,^$?[\]{}|\\*+.-]+$/, "only CloudWatch's regex characters");
    const span = 'Lambda runtime invoke{requestId="8f5c1f44-1d0e-4b1b-9d55-2a4a4ad0c001" xrayTraceId="Root=1-65f0a1b2-0123456789abcdef01234567;Parent=1;Sampled=1"}: ';
    const target = 'stacksync_shared::triggers::webhook::handler::refusal: ';
    const line = (level: string, fields: string, inSpan = true) => `${level} ${inSpan ? span : ''}${target}webhook delivery refused ${fields}`;
    const matches = (l: string) => new RegExp(regex).test(l);
    for (const l of [
      line('ERROR', 'status=401 reason="the webhook secret cannot be read: GetSecretValue: ResourceNotFoundException: Secrets Manager can\'t find the specified secret." sender="github" delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958"'),
      line('ERROR', 'status=401 reason="the webhook secret cannot be read: x" sender="gitlab" delivery="none"', false),
    ]) {
      assert.ok(matches(l), l);
    }
    for (const l of [
      line(' WARN', 'status=401 reason="the signature does not match" sender="github" delivery="ERROR"'),
      line(' WARN', 'status=405 reason="ERROR: webhooks are POSTed" sender="unknown" delivery="none"'),
      line(' WARN', 'status=400 reason="no known sender: the webhook secret cannot be read" sender="unknown" delivery="none"'),
      line(' WARN', 'status=413 reason="the body is over 4194304 bytes" sender="unknown" delivery="none"', false),
      `ERROR ${span}stacksync_shared::lambda: another failure, not a refusal`,
    ]) {
      assert.ok(!matches(l), l);
    }
  });
});
