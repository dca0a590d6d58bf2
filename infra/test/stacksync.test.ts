// Offline test of the CDK app: synthesizes the stack without building Rust
// and checks it against template.yaml's architecture, the README's
// "IAM by function" table and cdk-nag's AwsSolutions pack.
// Run: `npx tsc && node --test dist/test/` (scripts/check-infra).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { strict as assert } from 'node:assert';
import { after, describe, test } from 'node:test';
import { App, Aspects, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { propsFromContext } from '../lib/context';
import {
  APPROVER_PATTERN,
  CODECOMMIT_REPOSITORY_ARN,
  DRIFT_READ_GAPS,
  DRIFT_READ_POLICY,
  FUNCTIONS,
  SCHEDULE_EXPRESSION,
  SOURCE_PARAMETER_ARN,
  SOURCE_SECRET_ARN,
  StackSyncStack,
  VALUE_PARAMETER_ARN,
  VALUE_SECRET_ARN,
  findWorkspaceRoot,
  nagFinding,
  type StackSyncProps,
} from '../lib/stacksync-stack';

const INFRA = path.resolve(__dirname, '..', '..');
const ROOT = findWorkspaceRoot(__dirname);
const CDK_CONTEXT = JSON.parse(fs.readFileSync(path.join(INFRA, 'cdk.json'), 'utf8')).context as Record<string, unknown>;

// A stand-in `cargo` first on PATH, installed before any RustFunction exists
// (cargo-lambda-cdk probes `cargo lambda --version` once per process). It
// logs every call and answers like cargo-lambda: `lambda build` writes a stub
// bootstrap into --lambda-dir. So the test proves that bundling is skipped
// even where the real cargo-lambda is installed, and it can check the build
// command a real `cdk synth` runs.
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
  stack: StackSyncStack;
  template: Template;
  json: CfnTemplate;
}
interface CfnResource {
  Type: string;
  Properties?: Record<string, any>;
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
  Metadata?: Record<string, any>;
}
interface CfnTemplate {
  Resources: Record<string, CfnResource>;
  Outputs?: Record<string, any>;
}

/** The stack as `cdk synth` makes it (cdk.json's feature flags, cdk-nag), but with bundling skipped unless `bundle`. */
function synth(props: StackSyncProps = {}, bundle = false): Synth {
  const context: Record<string, unknown> = { ...CDK_CONTEXT };
  if (!bundle) context['aws:cdk:bundling-stacks'] = [];
  const app = new App({ context });
  const stack = new StackSyncStack(app, 'StackSyncTest', props);
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  const template = Template.fromStack(stack);
  return { stack, template, json: template.toJSON() as CfnTemplate };
}

const PREFIX = 'prod-';
const CFN_ROLES = ['arn:aws:iam::111122223333:role/cfn-exec', 'arn:aws:iam::111122223333:role/cfn-exec-2'];
const TARGET_ROLES = ['arn:aws:iam::444455556666:role/stacksync'];
const WEBHOOK_SECRET = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/webhook-AbCdEf';
const SOURCE_BUCKETS = ['acme-stacksync-sources', 'acme-other-sources'];
const SOURCE_SECRETS = ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git-token-AbCdEf'];
const SOURCE_PARAMETERS = ['arn:aws:ssm:eu-west-1:111122223333:parameter/stacksync/git-password'];
const CODECOMMIT_REPOSITORIES = ['arn:aws:codecommit:eu-west-1:111122223333:infra'];
const VALUE_SECRETS = ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/db-password-AbCdEf'];
const VALUE_PARAMETERS = ['arn:aws:ssm:eu-west-1:111122223333:parameter/app/*'];
const ALARM_TOPIC = 'arn:aws:sns:eu-west-1:111122223333:ops-alerts';
/** The webhook's `webhook delivery refused` lines at ERROR (its secret cannot be read), as template.yaml has it. */
const WEBHOOK_SECRET_UNREADABLE_PATTERN = '%^ERROR.*webhook.delivery.refused%';
const APPROVERS = ['arn:aws:iam::111122223333:role/release-managers', 'arn:aws:iam::111122223333:user/ops-*'];
const FULL: StackSyncProps = {
  sourceBucketNames: SOURCE_BUCKETS,
  sourceSecretArns: SOURCE_SECRETS,
  sourceParameterArns: SOURCE_PARAMETERS,
  codeCommitRepositoryArns: CODECOMMIT_REPOSITORIES,
  valueSecretArns: VALUE_SECRETS,
  valueParameterArns: VALUE_PARAMETERS,
  webhookReservedConcurrency: 20,
  eventsReservedConcurrency: 0,
  stackNamePrefix: PREFIX,
  cloudFormationRoleArns: CFN_ROLES,
  targetAccountRoleArns: TARGET_ROLES,
  webhookSecretArn: WEBHOOK_SECRET,
  alarmTopicArn: ALARM_TOPIC,
  scheduleExpression: 'rate(2 minutes)',
  maxStartsPerRun: 200,
  maxDriftDetections: 25,
  driftReadPolicy: 'job-function/ViewOnlyAccess',
  approvers: APPROVERS,
};
/**
 * The statements a role has only with props (template.yaml: each under the !If of its condition). By Sid, not by
 * action: artifact-fetch always reads its artifacts (s3:GetObject, s3:ListBucket), the scheduler only source buckets.
 */
const OPTIONAL_SIDS = new Set([
  'PassServiceRoles',
  'TargetAccounts',
  'Secret',
  'SourceSecrets',
  'SourceParameters',
  'SourceObjects',
  'SourceBuckets',
  'CodeCommit',
  'ValueSecrets',
  'ValueParameters',
]);
/** The private sources' statements, in their order at the end of the artifact-fetch and scheduler roles. */
const SOURCE_SIDS = ['SourceSecrets', 'SourceParameters', 'SourceObjects', 'SourceBuckets', 'CodeCommit'];
/** The stack parameters' secrets and SSM parameters, in their order at the end of the roles of the functions that read them. */
const VALUE_SIDS = ['ValueSecrets', 'ValueParameters'];
/**
 * The functions that read the stacks' parameters from Secrets Manager and SSM (poll-status reads them again when a
 * run ends Ready: no output holding one is recorded).
 */
const VALUE_READERS = ['TemplateUpload', 'ChangeSet', 'PollStatus'];
const STEPS = FUNCTIONS.filter((f) => f.reconcileStep);
const TRIGGERS = FUNCTIONS.filter((f) => !f.reconcileStep);

// Synthesized once, on first use. A synthesis fails on an unsuppressed cdk-nag
// error (cdk.json: @aws-cdk/core:annotationsInValidationReport), and then each
// test that uses it fails with the findings.
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

function ofType(json: CfnTemplate, type: string): [string, CfnResource][] {
  return Object.entries(json.Resources).filter(([, r]) => r.Type === type);
}
function only(json: CfnTemplate, type: string): [string, CfnResource] {
  const found = ofType(json, type);
  assert.equal(found.length, 1, `one ${type}`);
  return found[0];
}
const arr = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
function logicalId(s: Synth, construct: { node: { defaultChild?: unknown } }): string {
  return s.stack.resolve((construct.node.defaultChild as { logicalId: string }).logicalId) as string;
}

const TEMPLATE_YAML = fs.readFileSync(path.join(ROOT, 'template.yaml'), 'utf8');
/** The text of one resource of template.yaml (from `  <id>:` to the next line indented by two spaces). */
function templateResource(id: string): string {
  const start = TEMPLATE_YAML.indexOf(`\n  ${id}:\n`);
  assert.ok(start >= 0, `template.yaml has ${id}`);
  const rest = TEMPLATE_YAML.slice(start + 1);
  const end = rest.slice(1).search(/\n {2}\S/);
  return end < 0 ? rest : rest.slice(0, end + 1);
}

interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}
/**
 * Every statement of every identity policy (inline on roles, AWS::IAM::Policy and AWS::IAM::ManagedPolicy), with the
 * roles it applies to by the policy's `Roles`; a customer managed policy's statements also name the policy
 * (`managedPolicy`: attached through a role's ManagedPolicyArns, they are not the role's own statements).
 */
function identityStatements(json: CfnTemplate): { roles: string[]; statement: Statement; managedPolicy?: string }[] {
  const out: { roles: string[]; statement: Statement; managedPolicy?: string }[] = [];
  for (const [id, r] of Object.entries(json.Resources)) {
    if (r.Type === 'AWS::IAM::Role') {
      for (const p of arr(r.Properties?.Policies)) {
        for (const statement of arr<Statement>(p.PolicyDocument.Statement)) out.push({ roles: [id], statement });
      }
    } else if (r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy') {
      const roles = arr<{ Ref: string }>(r.Properties?.Roles).map((x) => x.Ref);
      const managedPolicy = r.Type === 'AWS::IAM::ManagedPolicy' ? id : undefined;
      for (const statement of arr<Statement>(r.Properties?.PolicyDocument.Statement)) out.push({ roles, statement, managedPolicy });
    }
  }
  return out;
}

/** The Sids of a function's statements in template.yaml (`<id>Function`), in their order. */
function yamlSids(id: string): string[] {
  return [...templateResource(`${id}Function`).matchAll(/\bSid: ([A-Za-z]+)\b/g)].map((m) => m[1]);
}

/** The README's "IAM by function" table: function -> its actions. */
function readmeIam(): Map<string, Set<string>> {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^### IAM by function$/m)[1]?.split(/^#{2,3} /m)[0];
  assert.ok(section, 'README.md has a "### IAM by function" section');
  const table = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || !/^[a-z][a-z-]*$/.test(cells[1]) || cells[1] === 'function') continue;
    table.set(cells[1], new Set([...cells[2].matchAll(/`([a-z0-9-]+:[A-Za-z0-9]+)`/g)].map((m) => m[1])));
  }
  return table;
}

/** One function's role statements as template.yaml writes them, with resources named TABLE, BUCKET, STACKS, STATE_MACHINE. */
function roleStatements(s: Synth, spec: (typeof FUNCTIONS)[number]) {
  const roleId = logicalId(s, s.stack.functions[spec.id].role as any);
  const table = `<${logicalId(s, s.stack.table)}.Arn>`;
  const bucket = `<${logicalId(s, s.stack.bucket)}.Arn>`;
  const stacks = `arn:<AWS::Partition>:cloudformation:*:<AWS::AccountId>:stack/`;
  const machine = `<${logicalId(s, s.stack.stateMachine)}>`;
  const name = (r: unknown) =>
    nagFinding(r)
      .replace(table, 'TABLE')
      .replace(bucket, 'BUCKET')
      .replace(stacks, 'STACKS:')
      .replace(machine, 'STATE_MACHINE');
  return identityStatements(s.json)
    .filter((x) => x.roles.includes(roleId))
    .map(({ statement }) => ({
      sid: statement.Sid,
      actions: arr(statement.Action).sort(),
      resources: arr(statement.Resource).map(name).sort(),
      condition: statement.Condition,
    }))
    .filter((x) => x.sid !== 'OwnLogs' && !x.actions.every((a) => a.startsWith('xray:')));
}

describe('synthesis without Rust', () => {
  test('cargo-lambda bundling is skipped: no `cargo lambda build`, only the version probe', () => {
    assert.equal(cargoCalls().length, 0, 'the first synthesis of this file');
    const defaults = lazyDefaults();
    lazyFull();
    assert.equal(defaults.stack.bundlingRequired, false);
    // The stand-in answered the probe, so a bundling attempt would have run `cargo lambda build` locally.
    assert.deepEqual(cargoCalls(), ['lambda --version'], 'no cargo lambda build while aws:cdk:bundling-stacks is []');
    for (const [, fn] of ofType(defaults.json, 'AWS::Lambda::Function')) {
      assert.ok(fn.Properties?.Code?.S3Key, 'the code is still an asset');
    }
  });

  test('a real synth (bundling on) builds each binary with cargo lambda, for the architecture, in the release profile', () => {
    const before = cargoCalls().length;
    const s = synth({ architecture: 'arm64' }, true);
    assert.equal(s.stack.bundlingRequired, true);
    const builds = cargoCalls()
      .slice(before)
      .filter((c) => c.startsWith('lambda build'));
    assert.equal(builds.length, FUNCTIONS.length);
    for (const spec of FUNCTIONS) {
      const build = builds.find((b) => b.includes(` --bin ${spec.binary} `));
      assert.ok(build, `cargo lambda build --bin ${spec.binary}`);
      assert.match(build, / --release /);
      assert.match(build, / --arm64 /);
      assert.match(build, new RegExp(` --flatten ${spec.binary}$`));
    }
  });
});

describe('IAM conformance', () => {
  // The Rust test tests/tests/iam.rs holds every AWS call the integration suite recorded against each role of
  // this synthesis (and of template.yaml): the installation of tests/fixtures/iam/installation.json.
  test('the synthesis for the IAM conformance test is written to dist/conformance.template.json', () => {
    const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'fixtures', 'iam', 'installation.json'), 'utf8'));
    const s = synth({
      stackNamePrefix: fixture.stackNamePrefix,
      cloudFormationRoleArns: fixture.cloudFormationRoleArns,
      targetAccountRoleArns: fixture.targetAccountRoleArns,
      webhookSecretArn: fixture.webhookSecretArn,
      sourceSecretArns: fixture.sourceSecretArns,
      sourceParameterArns: fixture.sourceParameterArns,
      valueSecretArns: fixture.valueSecretArns,
      valueParameterArns: fixture.valueParameterArns,
      sourceBucketNames: fixture.sourceBucketNames,
      codeCommitRepositoryArns: fixture.codeCommitRepositoryArns,
    });
    const out = path.join(INFRA, 'dist', 'conformance.template.json');
    fs.writeFileSync(out, `${JSON.stringify(s.json, null, 1)}\n`);
    const roles = ofType(s.json, 'AWS::IAM::Role').flatMap(([, r]) => arr(r.Properties?.Policies).map((p) => p.PolicyName));
    for (const spec of FUNCTIONS) assert.ok(roles.includes(spec.binary), `a role with the inline policy ${spec.binary}`);
  });
});

describe('functions', () => {
  test('twelve Rust functions (seven steps; the webhook, scheduler, drift and events triggers; the answer function): provided.al2023, x86_64 by default, 256 MB, active tracing', () => {
    const defaults = lazyDefaults();
    const fns = ofType(defaults.json, 'AWS::Lambda::Function');
    assert.equal(fns.length, 12);
    assert.equal(STEPS.length, 7);
    assert.deepEqual(TRIGGERS.map((f) => f.binary), ['webhook', 'scheduler', 'drift', 'events', 'answer']);
    for (const [, fn] of fns) {
      const p = fn.Properties!;
      assert.equal(p.Runtime, 'provided.al2023');
      assert.equal(p.Handler, 'bootstrap');
      assert.deepEqual(p.Architectures, ['x86_64']);
      assert.equal(p.MemorySize, 256);
      assert.deepEqual(p.TracingConfig, { Mode: 'Active' });
      const logGroup = defaults.json.Resources[p.LoggingConfig.LogGroup.Ref];
      assert.equal(logGroup.Type, 'AWS::Logs::LogGroup');
      assert.equal(logGroup.Properties?.RetentionInDays, 30);
    }
    // The binaries and descriptions of template.yaml's functions.
    const binaries = [...TEMPLATE_YAML.matchAll(/BuildProperties: \{ Binary: ([a-z-]+) \}/g)].map((m) => m[1]);
    const descriptions = [...TEMPLATE_YAML.matchAll(/^ +Description: "(stacksync [^"]+)"$/gm)].map((m) => m[1]);
    assert.equal(binaries.length, 12);
    assert.deepEqual(FUNCTIONS.map((f) => f.binary).sort(), binaries.sort());
    assert.deepEqual(fns.map(([, fn]) => fn.Properties!.Description).sort(), descriptions.sort());
  });

  test("each function's timeout and environment variables are template.yaml's (Globals plus its own)", () => {
    const defaults = lazyDefaults();
    const globals = TEMPLATE_YAML.split(/^Globals:$/m)[1].split(/^Resources:$/m)[0];
    const envNames = (text: string) => [...text.matchAll(/^ +(STACKSYNC_[A-Z_]+):/gm)].map((m) => m[1]);
    const timeout = (text: string) => text.match(/^ +Timeout: (\d+)$/m)?.[1];
    assert.deepEqual(envNames(globals), [
      'STACKSYNC_TABLE',
      'STACKSYNC_BUCKET',
      'STACKSYNC_TEMPLATE_URL_BASE',
      'STACKSYNC_LOG',
      'STACKSYNC_STACK_NAME_PREFIX',
      'STACKSYNC_SERVICE_ROLE_ARNS',
      'STACKSYNC_REQUIRE_ROLE_ARN',
      'STACKSYNC_EVENT_BUS',
    ]);
    for (const spec of FUNCTIONS) {
      const yaml = templateResource(`${spec.id}Function`);
      assert.match(yaml, new RegExp(`Binary: ${spec.binary} `), `${spec.id}Function is ${spec.binary}`);
      const p = defaults.json.Resources[logicalId(defaults, defaults.stack.functions[spec.id])].Properties!;
      assert.equal(p.Timeout, Number(timeout(yaml) ?? timeout(globals)), `${spec.binary} timeout`);
      assert.deepEqual(Object.keys(p.Environment.Variables).sort(), [...envNames(globals), ...envNames(yaml)].sort(), spec.binary);
    }
  });

  test('the environment: table, bucket, template URL base, log level, what the installation allows; the triggers but drift also the state machine ARN, the webhook its secret ARN, the scheduler its cap and schedule, drift its cap; approval the answer URL, answer the approvers', () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const [s, secret, maxStarts, schedule, maxDetections, prefix, roles, approvers] of [
      [defaults, '', '50', 'rate(5 minutes)', '10', 'stacksync-', '', ''],
      [full, WEBHOOK_SECRET, '200', 'rate(2 minutes)', '25', PREFIX, CFN_ROLES.join(','), APPROVERS.join(',')],
    ] as const) {
      const common = {
        STACKSYNC_TABLE: { Ref: logicalId(s, s.stack.table) },
        STACKSYNC_BUCKET: { Ref: logicalId(s, s.stack.bucket) },
        STACKSYNC_TEMPLATE_URL_BASE: { 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [logicalId(s, s.stack.bucket), 'RegionalDomainName'] }]] },
        STACKSYNC_LOG: 'info',
        STACKSYNC_STACK_NAME_PREFIX: prefix,
        STACKSYNC_SERVICE_ROLE_ARNS: roles,
        STACKSYNC_REQUIRE_ROLE_ARN: 'true',
        STACKSYNC_EVENT_BUS: 'default',
      };
      const machine = { STACKSYNC_STATE_MACHINE_ARN: { Ref: logicalId(s, s.stack.stateMachine) } };
      const expected: Record<string, [Record<string, unknown>, number]> = {
        webhook: [{ ...common, ...machine, STACKSYNC_WEBHOOK_SECRET_ARN: secret }, 30],
        scheduler: [{ ...common, ...machine, STACKSYNC_MAX_STARTS: maxStarts, STACKSYNC_SCHEDULE: schedule }, 120],
        // The drift function starts no execution: no state machine ARN.
        drift: [{ ...common, STACKSYNC_MAX_DETECTIONS: maxDetections }, 120],
        events: [{ ...common, ...machine }, 30],
        // Where its runs' waits are answered: the answer function's URL (made after the steps).
        approval: [{ ...common, STACKSYNC_ANSWER_URL: { 'Fn::GetAtt': [logicalId(s, s.stack.functionUrls.Answer), 'FunctionUrl'] } }, 300],
        // The installation's approvers, joined with "," (template.yaml: !Join [",", !Ref Approvers]).
        answer: [{ ...common, STACKSYNC_APPROVERS: approvers }, 30],
      };
      for (const spec of FUNCTIONS) {
        const p = s.json.Resources[logicalId(s, s.stack.functions[spec.id])].Properties!;
        const [env, timeout] = expected[spec.binary] ?? [common, 300];
        assert.deepEqual(p.Environment.Variables, env, spec.binary);
        assert.equal(p.Timeout, timeout, spec.binary);
      }
    }
    // template.yaml: the cap is the MaxStartsPerRun parameter (Number, 1 to 1000, default 50).
    assert.match(templateResource('SchedulerFunction'), /\n +STACKSYNC_MAX_STARTS: !Ref MaxStartsPerRun\n/);
    assert.match(templateResource('SchedulerFunction'), /\n +STACKSYNC_SCHEDULE: !Ref ScheduleExpression\n/);
    assert.match(TEMPLATE_YAML, /\n {2}MaxStartsPerRun:\n {4}Type: Number\n {4}Default: 50\n {4}MinValue: 1\n {4}MaxValue: 1000\n/);
    // The drift detections at once: the MaxDriftDetections parameter (Number, 1 to 100, default 10), the drift
    // function's (no longer the scheduler's).
    assert.match(templateResource('DriftFunction'), /\n +STACKSYNC_MAX_DETECTIONS: !Ref MaxDriftDetections\n/);
    assert.doesNotMatch(templateResource('SchedulerFunction'), /STACKSYNC_MAX_DETECTIONS/);
    assert.match(TEMPLATE_YAML, /\n {2}MaxDriftDetections:\n {4}Type: Number\n {4}Default: 10\n {4}MinValue: 1\n {4}MaxValue: 100\n/);
    // The approvers: the Approvers parameter (a comma-delimited list, empty by default), the answer function's; the
    // approval function is told the answer function's URL.
    assert.match(templateResource('AnswerFunction'), /\n +STACKSYNC_APPROVERS: !Join \[",", !Ref Approvers\]\n/);
    assert.match(templateResource('ApprovalFunction'), /\n +STACKSYNC_ANSWER_URL: !GetAtt AnswerFunctionUrl\.FunctionUrl\n/);
    assert.match(TEMPLATE_YAML, /\n {2}Approvers:\n {4}Type: CommaDelimitedList\n {4}Default: ""\n/);
  });

  test('the webhook and the events function have reserved concurrency (10 and 5 by default; 0: none), the steps none', () => {
    for (const [s, webhook, events] of [[lazyDefaults(), 10, 5], [lazyFull(), 20, undefined]] as const) {
      for (const spec of FUNCTIONS) {
        const p = s.json.Resources[logicalId(s, s.stack.functions[spec.id])].Properties!;
        const want = spec.binary === 'webhook' ? webhook : spec.binary === 'events' ? events : undefined;
        assert.equal(p.ReservedConcurrentExecutions, want, spec.binary);
      }
    }
    assert.match(templateResource('WebhookFunction'), /\n {6}ReservedConcurrentExecutions: !If \[ReservesWebhookConcurrency, !Ref WebhookReservedConcurrency, !Ref AWS::NoValue\]\n/);
    assert.match(templateResource('EventsFunction'), /\n {6}ReservedConcurrentExecutions: !If \[ReservesEventsConcurrency, !Ref EventsReservedConcurrency, !Ref AWS::NoValue\]\n/);
    assert.match(TEMPLATE_YAML, /\n {2}WebhookReservedConcurrency:\n {4}Type: Number\n {4}Default: 10\n {4}MinValue: 0\n/);
    assert.match(TEMPLATE_YAML, /\n {2}EventsReservedConcurrency:\n {4}Type: Number\n {4}Default: 5\n {4}MinValue: 0\n/);
  });

  test('architecture and log retention are props', () => {
    const s = synth({ architecture: 'arm64', logRetentionDays: 7 });
    for (const [, fn] of ofType(s.json, 'AWS::Lambda::Function')) {
      assert.deepEqual(fn.Properties!.Architectures, ['arm64']);
    }
    const groups = ofType(s.json, 'AWS::Logs::LogGroup');
    assert.equal(groups.length, 13, 'twelve functions and the state machine');
    for (const [, g] of groups) assert.equal(g.Properties!.RetentionInDays, 7);
  });

  test("each function's log group, and the state machine's, as template.yaml's", () => {
    const defaults = lazyDefaults();
    // template.yaml: `<id>Logs` named /aws/lambda/<the function>, with LogRetentionDays, for every function.
    const yamlGroups = [...TEMPLATE_YAML.matchAll(/^ {2}([A-Za-z]+):\n {4}Type: AWS::Logs::LogGroup\n {4}Properties: (.*)$/gm)];
    const functionGroups = yamlGroups.filter(([, id]) => id !== 'StateMachineLogs');
    assert.deepEqual(functionGroups.map(([, id]) => id).sort(), FUNCTIONS.map((f) => `${f.id}Logs`).sort());
    for (const [, id, properties] of functionGroups) {
      const fn = id.replace(/Logs$/, 'Function');
      assert.equal(properties, `{ LogGroupName: !Sub "/aws/lambda/\${${fn}}", RetentionInDays: !Ref LogRetentionDays }`, id);
    }
    assert.deepEqual(
      yamlGroups.filter(([, id]) => id === 'StateMachineLogs').map(([, , p]) => p),
      ['{ RetentionInDays: !Ref LogRetentionDays }'],
    );
    // The CDK app: one group per function (its own, in its LoggingConfig) and the state machine's.
    assert.equal(ofType(defaults.json, 'AWS::Logs::LogGroup').length, yamlGroups.length);
    for (const spec of FUNCTIONS) {
      const fn = defaults.json.Resources[logicalId(defaults, defaults.stack.functions[spec.id])].Properties!;
      assert.equal(fn.LoggingConfig.LogGroup.Ref, logicalId(defaults, defaults.stack.logGroups[spec.id]), spec.binary);
    }
  });

  test('bad props are refused', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    let n = 0;
    const make = (props: StackSyncProps) => () => new StackSyncStack(app, `Bad${n++}`, props);
    assert.throws(make({ stackNamePrefix: 'prod_*' }), /stackNamePrefix/);
    assert.throws(make({ cloudFormationRoleArns: ['arn:aws:iam::111122223333:role/*'] }), /not an IAM role ARN/);
    assert.throws(make({ targetAccountRoleArns: ['*'] }), /not an IAM role ARN/);
    assert.throws(make({ logRetentionDays: 31 }), /logRetentionDays/);
    assert.throws(make({ sourceBucketNames: ['Acme_Sources'] }), /not an S3 bucket name/);
    assert.throws(make({ webhookReservedConcurrency: -1 }), /webhookReservedConcurrency/);
    assert.throws(make({ eventsReservedConcurrency: 1.5 }), /eventsReservedConcurrency/);
    assert.throws(make({ architecture: 'riscv' as never }), /architecture/);
    assert.throws(make({ webhookSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:*' }), /webhookSecretArn/);
    assert.throws(make({ webhookSecretArn: 'arn:aws:ssm:eu-west-1:111122223333:parameter/webhook' }), /webhookSecretArn/);
    assert.throws(make({ webhookSecretArn: 'stacksync/webhook' }), /webhookSecretArn/);
    // The private sources' and the stack parameters' ARNs: wildcards in the name only.
    for (const [prop, bad, what] of [
      ['sourceSecretArns', 'arn:aws:ssm:eu-west-1:111122223333:parameter/stacksync/git-password', 'a Secrets Manager secret ARN'],
      ['sourceSecretArns', 'stacksync/git-token', 'a Secrets Manager secret ARN'],
      ['sourceSecretArns', 'arn:aws:secretsmanager:*:111122223333:secret:stacksync/*', 'a Secrets Manager secret ARN'],
      ['sourceParameterArns', 'arn:aws:ssm:eu-west-1:111122223333:stacksync/git-password', 'an SSM parameter ARN'],
      ['sourceParameterArns', '/stacksync/git-password', 'an SSM parameter ARN'],
      ['sourceParameterArns', 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:git-token', 'an SSM parameter ARN'],
      ['valueSecretArns', 'arn:aws:ssm:eu-west-1:111122223333:parameter/app/db-password', 'a Secrets Manager secret ARN'],
      ['valueSecretArns', 'app/db-password', 'a Secrets Manager secret ARN'],
      ['valueSecretArns', 'arn:aws:secretsmanager:eu-west-1:*:secret:app/*', 'a Secrets Manager secret ARN'],
      ['valueParameterArns', '/app/db-password', 'an SSM parameter ARN'],
      ['valueParameterArns', 'app/db-password', 'an SSM parameter ARN'],
      ['valueParameterArns', 'arn:aws:ssm:eu-west-1:111122223333:app/db-password', 'an SSM parameter ARN'],
      ['valueParameterArns', 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:app', 'an SSM parameter ARN'],
      ['codeCommitRepositoryArns', 'codecommit::eu-west-1://infra', 'a CodeCommit repository ARN'],
      ['codeCommitRepositoryArns', 'arn:aws:codecommit:eu-west-1:111122223333:infra/main', 'a CodeCommit repository ARN'],
      ['codeCommitRepositoryArns', 'arn:aws:codecommit:eu-west-1:*:infra', 'a CodeCommit repository ARN'],
    ] as const) {
      const named = (err: Error) => err.message.startsWith(`${prop}: "${bad}" is not ${what} (`);
      assert.throws(make({ [prop]: [bad] }), named, `${prop} ${bad}`);
    }
    for (const bad of ['5m', 'rate(0 minutes)', 'rate(5 minutes', 'cron()', 'at(2030-01-01T00:00:00)', '']) {
      assert.throws(make({ scheduleExpression: bad }), /scheduleExpression/, bad);
    }
    for (const bad of [0, 1001, 2.5, Number.NaN]) {
      assert.throws(make({ maxStartsPerRun: bad }), /maxStartsPerRun/, String(bad));
    }
    for (const bad of [0, 101, 2.5, Number.NaN]) {
      assert.throws(make({ maxDriftDetections: bad }), /maxDriftDetections/, String(bad));
    }
    // A managed policy's name (not its ARN), or none.
    for (const bad of ['', 'arn:aws:iam::aws:policy/ReadOnlyAccess', 'Read Only', 'R'.repeat(129)]) {
      assert.throws(make({ driftReadPolicy: bad }), /driftReadPolicy/, bad);
    }
    // Approvers: IAM principal ARN patterns, as the answer function checks them (shared/src/approvers.rs).
    for (const bad of [
      '*',
      'release-managers',
      'arn:aws:iam::111122223333:group/admins',
      'arn:aws:iam::*:role/admins',
      'arn:aws:iam::1111222233:role/admins',
      'arn:*:iam::111122223333:role/admins',
      'arn:aws:s3:::bucket',
      'arn:aws:iam::111122223333:role/a b',
      'arn:aws:iam::111122223333:role/x:y',
      'arn:awsX:iam::111122223333:role/x',
      // A role's path is not in its sessions' ARNs: such a pattern would let no one in.
      'arn:aws:iam::111122223333:role/path/to/*',
      // Kinds that live in the other service's ARNs: they would let no one in either.
      'arn:aws:sts::111122223333:role/admins',
      'arn:aws:iam::111122223333:assumed-role/admins/alice',
    ]) {
      assert.throws(make({ approvers: [bad] }), (err: Error) => err.message.startsWith(`approvers: "${bad}" is not an IAM principal ARN pattern`), bad);
    }
    // Empty is no secret, as template.yaml's default; other partitions are secret ARNs too.
    const good = new App({ context: { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] } });
    assert.doesNotThrow(() => new StackSyncStack(good, 'Good0', { webhookSecretArn: '' }));
    const cn = 'arn:aws-cn:secretsmanager:cn-north-1:111122223333:secret:hook';
    assert.doesNotThrow(() => new StackSyncStack(good, 'Good1', { webhookSecretArn: cn }));
    // template.yaml's ScheduleExpression pattern, the same expression.
    const pattern = TEMPLATE_YAML.match(/\n {2}ScheduleExpression:\n(?: {4}.*\n)*? {4}AllowedPattern: "(.*)"\n/)?.[1];
    assert.ok(pattern, 'template.yaml has ScheduleExpression with an AllowedPattern');
    assert.equal(pattern.replace(/\\\\/g, '\\'), SCHEDULE_EXPRESSION.source);
    for (const [i, ok] of ['rate(1 minute)', 'rate(2 hours)', 'cron(0/10 * * * ? *)'].entries()) {
      assert.doesNotThrow(() => new StackSyncStack(good, `Good${2 + i}`, { scheduleExpression: ok, maxStartsPerRun: 1000 }));
    }
    // template.yaml's MaxDriftDetections bounds and DriftReadPolicy pattern, the same.
    const drift = TEMPLATE_YAML.match(/\n {2}MaxDriftDetections:\n(?: {4}.*\n)*? {4}MinValue: (\d+)\n {4}MaxValue: (\d+)\n/);
    assert.ok(drift, 'template.yaml has MaxDriftDetections with MinValue and MaxValue');
    const [min, max] = [Number(drift[1]), Number(drift[2])];
    assert.throws(make({ maxDriftDetections: min - 1 }), /maxDriftDetections/);
    assert.throws(make({ maxDriftDetections: max + 1 }), /maxDriftDetections/);
    assert.doesNotThrow(() => new StackSyncStack(good, 'GoodDrift0', { maxDriftDetections: min }));
    assert.doesNotThrow(() => new StackSyncStack(good, 'GoodDrift1', { maxDriftDetections: max }));
    const policyPattern = TEMPLATE_YAML.match(/\n {2}DriftReadPolicy:\n(?: {4}.*\n)*? {4}AllowedPattern: "(.*)"\n/)?.[1];
    assert.ok(policyPattern, 'template.yaml has DriftReadPolicy with an AllowedPattern');
    assert.equal(new RegExp(policyPattern).source, DRIFT_READ_POLICY.source);
    assert.match(TEMPLATE_YAML, /\n {2}DriftReadPolicy:\n {4}Type: String\n {4}Default: SecurityAudit\n/);
    for (const [i, ok] of ['none', 'SecurityAudit', 'ReadOnlyAccess', 'job-function/ViewOnlyAccess', 'R'.repeat(128)].entries()) {
      assert.doesNotThrow(() => new StackSyncStack(good, `GoodPolicy${i}`, { driftReadPolicy: ok }), ok);
    }
    // Approvers as the answer function accepts them, and as template.yaml's Approvers AllowedPattern (the same
    // expression, empty allowed there: no approvers).
    const approverPattern = TEMPLATE_YAML.match(/\n {2}Approvers:\n(?: {4}.*\n)*? {4}AllowedPattern: "(.*)"\n/)?.[1];
    assert.ok(approverPattern, 'template.yaml has Approvers with an AllowedPattern');
    assert.equal(approverPattern, `^(${APPROVER_PATTERN.source.slice(1, -1).replace(/\\\//g, '/')})?$`);
    for (const [i, ok] of [
      'arn:aws:iam::111122223333:role/release-managers',
      'arn:aws:iam::111122223333:role/*',
      'arn:aws:iam::111122223333:user/path/to/*',
      'arn:aws-cn:iam::111122223333:user/ops-??',
      'arn:aws:sts::111122223333:assumed-role/admins/alice@example.com',
    ].entries()) {
      assert.match(ok, APPROVER_PATTERN);
      assert.doesNotThrow(() => new StackSyncStack(good, `GoodApprover${i}`, { approvers: [ok] }), ok);
    }
    // template.yaml's patterns of the private sources' and the stack parameters' ARNs (each `^(ARN)?$`: empty is
    // none), the same.
    for (const [parameter, regex] of [
      ['SourceSecretArns', SOURCE_SECRET_ARN],
      ['SourceParameterArns', SOURCE_PARAMETER_ARN],
      ['ValueSecretArns', VALUE_SECRET_ARN],
      ['ValueParameterArns', VALUE_PARAMETER_ARN],
      ['CodeCommitRepositoryArns', CODECOMMIT_REPOSITORY_ARN],
    ] as const) {
      const allowed = TEMPLATE_YAML.match(new RegExp(`\n {2}${parameter}:\n(?: {4}.*\n)*? {4}AllowedPattern: "\\^\\((.*)\\)\\?\\$"\n`))?.[1];
      assert.ok(allowed, `template.yaml has ${parameter} with an AllowedPattern ^(...)?$`);
      assert.equal(new RegExp(`^${allowed}$`).source, regex.source, parameter);
    }
    // IAM wildcards in the names, other partitions.
    assert.doesNotThrow(
      () =>
        new StackSyncStack(good, 'Good5', {
          sourceSecretArns: ['arn:aws-cn:secretsmanager:cn-north-1:111122223333:secret:git-token-??????'],
          sourceParameterArns: ['arn:aws-us-gov:ssm:us-gov-west-1:111122223333:parameter/stacksync/git/*'],
          codeCommitRepositoryArns: ['arn:aws-cn:codecommit:cn-north-1:111122223333:infra-*'],
          valueSecretArns: ['arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:app/*'],
          valueParameterArns: ['arn:aws-cn:ssm:cn-north-1:111122223333:parameter/app/db-password'],
        }),
    );
  });

  test('props from the CDK context: lists as JSON arrays or comma-separated', () => {
    const app = new App({
      context: {
        stackNamePrefix: 'prod-',
        requireRoleArn: 'false',
        cloudFormationRoleArns: `${CFN_ROLES[0]}, ${CFN_ROLES[1]}`,
        targetAccountRoleArns: TARGET_ROLES,
        webhookSecretArn: WEBHOOK_SECRET,
        alarmTopicArn: ` ${ALARM_TOPIC} `,
        eventBusName: ' ops ',
        notificationTopicArn: ALARM_TOPIC,
        logRetentionDays: '90',
        architecture: 'x86_64',
        scheduleExpression: 'rate(10 minutes)',
        maxStartsPerRun: '20',
        maxDriftDetections: '5',
        driftReadPolicy: ' none ',
        approvers: ` ${APPROVERS[0]},${APPROVERS[1]} `,
        sourceBucketNames: 'acme-a,acme-b',
        sourceSecretArns: `${SOURCE_SECRETS[0]},arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/*`,
        sourceParameterArns: SOURCE_PARAMETERS,
        codeCommitRepositoryArns: ` ${CODECOMMIT_REPOSITORIES[0]} `,
        valueSecretArns: `${VALUE_SECRETS[0]}, arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/*`,
        valueParameterArns: VALUE_PARAMETERS,
        webhookReservedConcurrency: '0',
        eventsReservedConcurrency: 2,
      },
    });
    assert.deepEqual(propsFromContext(app.node), {
      stackNamePrefix: 'prod-',
      requireRoleArn: false,
      cloudFormationRoleArns: CFN_ROLES,
      targetAccountRoleArns: TARGET_ROLES,
      webhookSecretArn: WEBHOOK_SECRET,
      alarmTopicArn: ALARM_TOPIC,
      eventBusName: 'ops',
      notificationTopicArn: ALARM_TOPIC,
      logRetentionDays: 90,
      architecture: 'x86_64',
      scheduleExpression: 'rate(10 minutes)',
      maxStartsPerRun: 20,
      maxDriftDetections: 5,
      driftReadPolicy: 'none',
      approvers: APPROVERS,
      sourceBucketNames: ['acme-a', 'acme-b'],
      sourceSecretArns: [SOURCE_SECRETS[0], 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/*'],
      sourceParameterArns: SOURCE_PARAMETERS,
      codeCommitRepositoryArns: CODECOMMIT_REPOSITORIES,
      valueSecretArns: [VALUE_SECRETS[0], 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/*'],
      valueParameterArns: VALUE_PARAMETERS,
      webhookReservedConcurrency: 0,
      eventsReservedConcurrency: 2,
    });
    assert.equal(propsFromContext(new App().node).webhookSecretArn, undefined);
    assert.equal(propsFromContext(new App().node).approvers, undefined);
    assert.deepEqual(propsFromContext(new App({ context: { approvers: APPROVERS } }).node).approvers, APPROVERS);
    assert.throws(() => propsFromContext(new App({ context: { requireRoleArn: 'yes' } }).node), /requireRoleArn "yes": true or false/);
  });
});

describe('registry and bucket', () => {
  test('the registry table: on demand, pk, the three GSIs, TTL expiresAt, PITR, SSE, deletion protection, retained', () => {
    const defaults = lazyDefaults();
    const [, table] = only(defaults.json, 'AWS::DynamoDB::Table');
    assert.equal(table.DeletionPolicy, 'Retain');
    assert.equal(table.UpdateReplacePolicy, 'Retain');
    defaults.template.hasResourceProperties('AWS::DynamoDB::Table', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: Match.arrayEquals([
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'schedShard', AttributeType: 'S' },
        { AttributeName: 'nextReconcileAt', AttributeType: 'N' },
        { AttributeName: 'sourceKey', AttributeType: 'S' },
        { AttributeName: 'stackName', AttributeType: 'S' },
      ]),
      GlobalSecondaryIndexes: [
        {
          IndexName: 'by-next-reconcile',
          KeySchema: [
            { AttributeName: 'schedShard', KeyType: 'HASH' },
            { AttributeName: 'nextReconcileAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
        {
          IndexName: 'by-source',
          KeySchema: [
            { AttributeName: 'sourceKey', KeyType: 'HASH' },
            { AttributeName: 'pk', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
        {
          IndexName: 'by-stack-name',
          KeySchema: [
            { AttributeName: 'stackName', KeyType: 'HASH' },
            { AttributeName: 'pk', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
        {
          IndexName: 'by-shard',
          KeySchema: [
            { AttributeName: 'schedShard', KeyType: 'HASH' },
            { AttributeName: 'pk', KeyType: 'RANGE' },
          ],
          Projection: {
            ProjectionType: 'INCLUDE',
            NonKeyAttributes: ['name', 'stackName', 'watch', 'suspended', 'deletionRequestedAt', 'leaseExpiresAt', 'nextReconcileAt'],
          },
        },
      ],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
    });
  });

  test('the artifact bucket: encrypted, no public access, owner enforced, versioned, TLS only, the lifecycle, access logs', () => {
    const defaults = lazyDefaults();
    const bucketId = logicalId(defaults, defaults.stack.bucket);
    const logsId = logicalId(defaults, defaults.stack.accessLogsBucket);
    const bucket = defaults.json.Resources[bucketId];
    assert.equal(bucket.DeletionPolicy, 'Retain');
    const secure = {
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
    };
    assert.deepEqual(
      bucket.Properties,
      {
        ...secure,
        VersioningConfiguration: { Status: 'Enabled' },
        LifecycleConfiguration: {
          Rules: [
            { Id: 'expire-artifacts', Status: 'Enabled', Prefix: 'artifacts/', ExpirationInDays: 30 },
            { Id: 'expire-parameters', Status: 'Enabled', Prefix: 'parameters/', ExpirationInDays: 90 },
            { Id: 'expire-old-templates', Status: 'Enabled', Prefix: 'templates/', ExpirationInDays: 365 },
            { Id: 'expire-approvals', Status: 'Enabled', Prefix: 'approvals/', ExpirationInDays: 32 },
            {
              Id: 'expire-noncurrent-versions',
              Status: 'Enabled',
              NoncurrentVersionExpiration: { NoncurrentDays: 7 },
              AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
            },
          ],
        },
        LoggingConfiguration: { DestinationBucketName: { Ref: logsId }, LogFilePrefix: 'artifact-bucket/' },
      },
    );
    // template.yaml's rules, the same (in the same order).
    const yamlRules = [...templateResource('ArtifactBucket').matchAll(/^ +- Id: ([a-z-]+)\n((?: +[A-Za-z]+: .*\n)+)/gm)].map(([, id, rest]) => ({
      id,
      prefix: rest.match(/Prefix: (.*)\n/)?.[1],
      days: rest.match(/ExpirationInDays: (\d+)\n/)?.[1],
    }));
    assert.deepEqual(
      yamlRules,
      bucket.Properties!.LifecycleConfiguration.Rules.map((r: any) => ({ id: r.Id, prefix: r.Prefix, days: r.ExpirationInDays?.toString() })),
    );
    defaults.template.hasResourceProperties('AWS::S3::Bucket', { ...secure, LoggingConfiguration: Match.absent() });
    for (const id of [bucketId, logsId]) {
      defaults.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: { Ref: id },
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Action: 's3:*',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        },
      });
    }
  });

  test("stored objects: only the step that stores them may write or delete them; approval tokens: only the approval function writes them, only the answer function reads them; verified answers: only the answer function writes them; target roles read by version only their own account's templates", () => {
    const defaults = lazyDefaults();
    const bucketId = logicalId(defaults, defaults.stack.bucket);
    const role = (id: string) => ({ 'Fn::GetAtt': [logicalId(defaults, defaults.stack.functions[id].role!), 'Arn'] });
    const objects = (prefix: string) => ({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, `/${prefix}`]] });
    const write = ['s3:DeleteObject', 's3:DeleteObjectVersion', 's3:PutObject'];
    const read = ['s3:GetObject', 's3:GetObjectVersion'];
    const denies: [string, string, string[], string[]][] = [
      ['OnlyArtifactFetchWritesArtifacts', 'ArtifactFetch', write, ['artifacts/*']],
      ['OnlyTemplateUploadWritesTemplates', 'TemplateUpload', write, ['parameters/*', 'templates/*']],
      ['OnlyTheAnswerFunctionReadsTokens', 'Answer', read, ['approvals/tokens/*']],
      ['OnlyTheApprovalFunctionWritesTokens', 'Approval', write, ['approvals/tokens/*']],
      ['OnlyTheAnswerFunctionWritesAnswers', 'Answer', write, ['approvals/answers/*']],
    ];
    const deny = ([sid, id, actions, prefixes]: (typeof denies)[number]) => ({
      Sid: sid,
      Effect: 'Deny',
      Principal: { AWS: '*' },
      Action: actions,
      Resource: prefixes.length === 1 ? objects(prefixes[0]) : prefixes.map(objects),
      Condition: { ArnNotEquals: { 'aws:PrincipalArn': role(id) } },
    });
    const [, bucketPolicy] = Object.entries(defaults.json.Resources).find(
      ([, r]: [string, any]) => r.Type === 'AWS::S3::BucketPolicy' && r.Properties.Bucket.Ref === bucketId,
    )! as [string, any];
    // TLS only, then these, in template.yaml's order.
    const statements = bucketPolicy.Properties.PolicyDocument.Statement as any[];
    assert.deepEqual(statements.map((st) => st.Sid ?? st.Condition?.Bool?.['aws:SecureTransport']), ['false', ...denies.map(([sid]) => sid)]);
    assert.deepEqual(statements.slice(1), denies.map(deny));
    // template.yaml's denies: the same actions on the same prefixes, except for the same function's role.
    const yaml = templateResource('ArtifactBucketPolicy');
    const yamlDenies = [
      ...yaml.matchAll(
        /^ +- Sid: (Only[A-Za-z]+)\n +Effect: Deny\n +Principal: "\*"\n +Action: \[(.*)\]\n +Resource:((?: !Sub ".*")|(?:\n +- !Sub ".*")+)\n +Condition:\n +ArnNotEquals: \{ "aws:PrincipalArn": !GetAtt ([A-Za-z]+)FunctionRole\.Arn \}$/gm,
      ),
    ].map(([, sid, actions, resources, fn]) => [
      sid,
      fn,
      actions.split(', ').sort(),
      [...resources.matchAll(/!Sub "\$\{ArtifactBucket\.Arn\}\/(.*)"/g)].map((m) => m[1]).sort(),
    ]);
    assert.deepEqual(yamlDenies, denies);
    assert.equal([...yaml.matchAll(/Effect: Deny/g)].length, denies.length + 1, 'and TLS only');
    assert.ok(
      !bucketPolicy.Properties.PolicyDocument.Statement.some((st: any) => String(st.Sid).startsWith('TargetAccounts')),
      'no target roles, no grant',
    );
    const target = 'arn:aws:iam::210987654321:role/stacksync-target';
    const withTargets = synth({ targetAccountRoleArns: [target] });
    // The templates of the calling role's own account only: `${aws:PrincipalAccount}` is an IAM policy variable,
    // literal in the policy (template.yaml: `${!aws:PrincipalAccount}` in its !Sub).
    const targetBucketId = logicalId(withTargets, withTargets.stack.bucket);
    withTargets.template.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: targetBucketId },
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'TargetAccountsReadTheirTemplates',
            Effect: 'Allow',
            Principal: { AWS: target },
            Action: 's3:GetObjectVersion',
            Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [targetBucketId, 'Arn'] }, '/templates/accounts/${aws:PrincipalAccount}/*']] },
          },
        ]),
      },
    });
    assert.match(
      templateResource('ArtifactBucketPolicy'),
      /\n +- !If\n +- CanAssumeRoles\n +- Sid: TargetAccountsReadTheirTemplates\n +Effect: Allow\n +Principal: \{ AWS: !Ref TargetAccountRoleArns \}\n +Action: s3:GetObjectVersion\n +Resource: !Sub "\$\{ArtifactBucket\.Arn\}\/templates\/accounts\/\$\{!aws:PrincipalAccount\}\/\*"\n +- !Ref AWS::NoValue\n/,
    );
    assert.doesNotMatch(TEMPLATE_YAML, /TargetAccountsReadTemplates/);
  });
});

describe('state machine, alarms, outputs', () => {
  test('the state machine: the ASL file, every placeholder bound to its function ARN, STANDARD, tracing, ERROR logs', () => {
    const defaults = lazyDefaults();
    const asl = fs.readFileSync(path.join(ROOT, 'statemachine', 'reconcile.asl.json'), 'utf8');
    const placeholders = new Set([...asl.matchAll(/\$\{([A-Za-z0-9]+)\}/g)].map((m) => m[1]));
    const [, sm] = only(defaults.json, 'AWS::StepFunctions::StateMachine');
    const p = sm.Properties!;
    assert.equal(p.StateMachineType, 'STANDARD');
    assert.deepEqual(p.TracingConfiguration, { Enabled: true });
    assert.equal(p.LoggingConfiguration.Level, 'ERROR');
    assert.equal(p.LoggingConfiguration.IncludeExecutionData, false);
    assert.ok(p.DefinitionS3Location, 'the definition is the ASL file, as an asset');
    const expected = Object.fromEntries(
      STEPS.map((f) => [
        `${f.id}FunctionArn`,
        { 'Fn::GetAtt': [logicalId(defaults, defaults.stack.functions[f.id]), 'Arn'] },
      ]),
    );
    assert.equal(Object.keys(expected).length, 7);
    assert.deepEqual(p.DefinitionSubstitutions, expected);
    assert.deepEqual([...placeholders].sort(), Object.keys(expected).sort(), 'the ASL placeholders are exactly these');
    // Its role may invoke exactly the seven step functions (not the triggers).
    const roleId = p.RoleArn['Fn::GetAtt'][0];
    const invoke = identityStatements(defaults.json).filter(
      (x) => x.roles.includes(roleId) && arr(x.statement.Action).includes('lambda:InvokeFunction'),
    );
    assert.equal(invoke.length, 1);
    assert.deepEqual(arr(invoke[0].statement.Action), ['lambda:InvokeFunction']);
    assert.deepEqual(
      arr(invoke[0].statement.Resource).map(nagFinding).sort(),
      Object.values(expected).map(nagFinding).sort(),
    );
    for (const spec of TRIGGERS) {
      const id = logicalId(defaults, defaults.stack.functions[spec.id]);
      assert.ok(!JSON.stringify(p).includes(id), `the state machine does not name ${id}`);
      assert.ok(!JSON.stringify(invoke).includes(id), `its role does not invoke ${id}`);
    }
  });

  test('events: every step and the drift function may put stacksync events on the bus; eventBusName none takes the grant and the variable away; a notification topic gets the example rule', () => {
    const putters = (json: CfnTemplate) => identityStatements(json).filter((x) => arr(x.statement.Action).includes('events:PutEvents'));
    const defaults = lazyDefaults();
    assert.equal(putters(defaults.json).length, 8, 'the seven steps and the drift function (drift notices)');
    const putterRoles = new Set(putters(defaults.json).flatMap((x) => x.roles));
    const expectedRoles = [...STEPS.map((f) => f.id), 'Drift'].map((id) => logicalId(defaults, defaults.stack.functions[id].role as any));
    assert.deepEqual([...putterRoles].sort(), expectedRoles.sort(), 'not the scheduler any more');
    const none = synth({ eventBusName: 'none' });
    assert.equal(putters(none.json).length, 0);
    const fn = none.json.Resources[logicalId(none, none.stack.functions.Finalize)].Properties!;
    assert.equal(fn.Environment.Variables.STACKSYNC_EVENT_BUS, 'none');
    const rule = (json: CfnTemplate) => ofType(json, 'AWS::Events::Rule').filter(([id]) => id.startsWith('NotificationRule'));
    assert.equal(rule(lazyDefaults().json).length, 0, 'no rule without a topic');
    const own = synth({ eventBusName: 'ops', notificationTopicArn: ALARM_TOPIC });
    const [[, r]] = rule(own.json);
    assert.equal(r.Properties!.EventBusName, 'ops');
    assert.deepEqual(r.Properties!.EventPattern.source, ['stacksync']);
    assert.deepEqual(r.Properties!.EventPattern['detail-type'], [
      'Reconcile Failed',
      'Approval Requested',
      'Change Set Rejected',
      'Drift Detected',
      'Drift Not Cleared',
    ]);
    assert.deepEqual(r.Properties!.Targets.map((t: any) => t.Arn), [ALARM_TOPIC]);
    for (const { statement } of putters(own.json)) {
      assert.deepEqual(statement.Resource, { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':events:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':event-bus/ops']] });
    }
    assert.match(templateResource('NotificationRule'), /\n {4}Condition: NotifiesTopic\n/);
    assert.throws(() => new StackSyncStack(new App(), 'BadBus', { eventBusName: 'arn:aws:events:x' }), /eventBusName/);
    assert.throws(() => new StackSyncStack(new App(), 'BadNotify', { notificationTopicArn: 'ops' }), /notificationTopicArn/);
  });

  test('no alarms without a topic to notify (as template.yaml: AlarmTopicArn empty)', () => {
    assert.equal(ofType(lazyDefaults().json, 'AWS::CloudWatch::Alarm').length, 0);
    assert.match(templateResource('ThrottlesAlarm'), /Condition: HasAlarmTopic\n/);
    // The webhook's unreadable secret is counted only for its alarm; unreadable registry items always.
    assert.deepEqual(
      ofType(lazyDefaults().json, 'AWS::Logs::MetricFilter').map(([, f]) => f.Properties!.MetricTransformations[0].MetricName),
      ['UnreadableRegistryItems'],
    );
    assert.match(templateResource('WebhookSecretUnreadableMetric'), /\n {4}Condition: HasAlarmTopic\n/);
    assert.match(templateResource('WebhookSecretUnreadableAlarm'), /\n {4}Condition: HasAlarmTopic\n/);
    assert.doesNotMatch(templateResource('UnreadableRegistryItemsMetric'), /Condition:/);
    assert.throws(() => new StackSyncStack(new App(), 'BadTopic', { alarmTopicArn: 'ops-alerts' }), /alarmTopicArn/);
  });

  test("with a topic, seven alarms notify it: failed executions, the step functions' errors, the other functions' errors (an alarm takes ten metrics at most, as template.yaml), throttles, the webhook's refused requests, its unreadable secret, unreadable registry items", () => {
    const defaults = lazyFull();
    const alarms = ofType(defaults.json, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties!);
    assert.equal(alarms.length, 7);
    assert.deepEqual(
      ofType(defaults.json, 'AWS::CloudWatch::Alarm').map(([id]) => id.replace(/[0-9A-F]{8}$/, '')).sort(),
      [...TEMPLATE_YAML.matchAll(/\n {2}([A-Za-z]+):\n {4}Type: AWS::CloudWatch::Alarm\n/g)].map((m) => m[1]).sort(),
      "template.yaml's alarms",
    );
    const unreadable = alarms.find((a) => a.MetricName === 'UnreadableRegistryItems')!;
    assert.equal(unreadable.Namespace, 'stacksync');
    assert.match(templateResource('UnreadableRegistryItemsAlarm'), /Namespace: stacksync\n/);
    const filters = ofType(defaults.json, 'AWS::Logs::MetricFilter').map(([, f]) => f.Properties!);
    assert.equal(filters.length, 2);
    const skipped = filters.find((f) => f.MetricTransformations[0].MetricName === 'UnreadableRegistryItems')!;
    assert.equal(skipped.FilterPattern, '"registry item skipped"');
    assert.match(templateResource('UnreadableRegistryItemsMetric'), /FilterPattern: '"registry item skipped"'\n/);
    // The webhook's secret cannot be read: every delivery is answered 401, as a bad signature, and each refusal logs
    // `webhook delivery refused` at ERROR (the others at WARN). Counted from the webhook's log, alarmed on at one.
    const secret = filters.find((f) => f.MetricTransformations[0].MetricName === 'WebhookSecretUnreadable')!;
    assert.deepEqual(secret.LogGroupName, { Ref: logicalId(defaults, defaults.stack.logGroups.Webhook) });
    assert.equal(secret.FilterPattern, WEBHOOK_SECRET_UNREADABLE_PATTERN);
    assert.deepEqual(secret.MetricTransformations, [
      { MetricNamespace: 'stacksync', MetricName: 'WebhookSecretUnreadable', MetricValue: '1', Unit: 'Count' },
    ]);
    const secretYaml = templateResource('WebhookSecretUnreadableMetric');
    assert.match(secretYaml, /\n {4}Type: AWS::Logs::MetricFilter\n/);
    assert.match(secretYaml, /\n {6}LogGroupName: !Ref WebhookLogs\n/);
    assert.equal(secretYaml.match(/\n {6}FilterPattern: '(.*)'\n/)?.[1], WEBHOOK_SECRET_UNREADABLE_PATTERN, "template.yaml's");
    assert.match(
      secretYaml,
      /\n {8}- \{ MetricNamespace: stacksync, MetricName: WebhookSecretUnreadable, MetricValue: "1", Unit: Count \}$/,
    );
    const unreadableSecret = alarms.find((a) => a.MetricName === 'WebhookSecretUnreadable')!;
    assert.equal(unreadableSecret.Namespace, 'stacksync');
    assert.equal(unreadableSecret.Statistic, 'Sum');
    assert.equal(unreadableSecret.Period, 300);
    const secretAlarmYaml = templateResource('WebhookSecretUnreadableAlarm');
    assert.match(secretAlarmYaml, /\n {6}Namespace: stacksync\n {6}MetricName: WebhookSecretUnreadable\n/);
    assert.match(secretAlarmYaml, /\n {6}Threshold: 1\n/);
    assert.match(secretAlarmYaml, /\n {6}TreatMissingData: notBreaching$/);
    assert.equal(
      secretAlarmYaml.match(/\n {6}AlarmDescription: (.*)\n/)?.[1],
      unreadableSecret.AlarmDescription,
      "template.yaml's description",
    );
    for (const a of alarms) assert.deepEqual(a.AlarmActions, [ALARM_TOPIC]);
    const refused = alarms.find((a) => a.MetricName === 'Url4xxCount')!;
    assert.equal(refused.Namespace, 'AWS/Lambda');
    assert.deepEqual(refused.Dimensions, [{ Name: 'FunctionName', Value: { Ref: logicalId(defaults, defaults.stack.functions.Webhook) } }]);
    assert.equal(refused.Statistic, 'Sum');
    assert.equal(refused.Threshold, 10);
    assert.match(templateResource('WebhookRejectionsAlarm'), /MetricName: Url4xxCount\n(.*\n)* +Threshold: 10\n/);
    const smId = logicalId(defaults, defaults.stack.stateMachine);
    const failed = alarms.find((a) => a.MetricName === 'ExecutionsFailed')!;
    assert.equal(failed.Namespace, 'AWS/States');
    assert.deepEqual(failed.Dimensions, [{ Name: 'StateMachineArn', Value: { Ref: smId } }]);
    const throttles = alarms.find((a) => a.MetricName === 'Throttles')!;
    assert.equal(throttles.Namespace, 'AWS/Lambda');
    assert.equal(throttles.Dimensions, undefined, 'account-wide');
    // Every function's errors, in one of two alarms: an alarm's math expression takes at most 10 metrics, so the
    // seven steps have one and the other functions (the triggers, the answer function) another, as in template.yaml.
    assert.deepEqual(FUNCTIONS.filter((f) => f.errorsMetricId === undefined), []);
    for (const [id, steps, description, sum] of [
      ['FunctionErrorsAlarm', true, 'a stacksync step function reports errors', 'SUM([fetch, upload, changeset, poll, del, approval, fin])'],
      [
        'TriggerErrorsAlarm',
        false,
        'a stacksync trigger (webhook, scheduler, drift, events) or the answer function reports errors',
        'SUM([hook, sched, drift, events, answer])',
      ],
    ] as const) {
      const [, alarm] = ofType(defaults.json, 'AWS::CloudWatch::Alarm').find(([logical]) => logical.startsWith(id))!;
      const errors = alarm.Properties!;
      assert.equal(errors.AlarmDescription, description, id);
      const alarmed = FUNCTIONS.filter((f) => f.reconcileStep === steps);
      assert.ok(alarmed.length <= 10, `${id}: at most 10 metrics`);
      const metrics = errors.Metrics.filter((m: any) => m.MetricStat);
      assert.deepEqual(
        metrics.map((m: any) => {
          assert.equal(m.MetricStat.Metric.MetricName, 'Errors');
          assert.equal(m.MetricStat.Metric.Namespace, 'AWS/Lambda');
          assert.equal(m.MetricStat.Stat, 'Sum');
          assert.equal(m.MetricStat.Period, 300);
          assert.equal(m.ReturnData, false);
          return [m.Id, m.MetricStat.Metric.Dimensions[0].Value.Ref];
        }),
        alarmed.map((f) => [f.errorsMetricId, logicalId(defaults, defaults.stack.functions[f.id])]),
        id,
      );
      const expression = errors.Metrics.find((m: any) => m.Expression).Expression;
      assert.equal(expression, sum, id);
      // template.yaml's alarm, the same: description, expression, and each id the Errors of its function.
      const yamlErrors = templateResource(id);
      assert.equal(yamlErrors.match(/\n +AlarmDescription: (.*)\n/)?.[1], description, `template.yaml's ${id}`);
      assert.equal(yamlErrors.match(/\n +Expression: "(.*)"\n/)?.[1], expression, `template.yaml's ${id}, the same`);
      const yamlMetrics = [...yamlErrors.matchAll(/\n +- \{ Id: ([a-z]+), ReturnData: false, MetricStat: \{ Metric: \{ Namespace: AWS\/Lambda, MetricName: Errors, Dimensions: \[\{ Name: FunctionName, Value: !Ref ([A-Za-z]+)Function \}\] \}, Period: 300, Stat: Sum \} \}/g)];
      assert.deepEqual(
        yamlMetrics.map(([, metric, fn]) => [metric, fn]),
        alarmed.map((f) => [f.errorsMetricId, f.id]),
        `template.yaml's ${id}`,
      );
    }
    for (const a of alarms.filter((x) => x !== refused)) {
      assert.equal(a.Threshold, 1);
      assert.equal(a.EvaluationPeriods, 1);
      assert.equal(a.ComparisonOperator, 'GreaterThanOrEqualToThreshold');
      assert.equal(a.TreatMissingData, 'notBreaching');
    }
  });

  test("the webhook's unreadable-secret filter matches its ERROR refusal lines, and no WARN line", () => {
    // CloudWatch Logs regex (between %…%): no spaces or quotes are allowed in it, so `.` stands for a space; `^`
    // anchors at the start of the event. The lines are what the webhook writes (shared/src/lambda.rs: the
    // tracing-subscriber text format without time or colours; the Lambda runtime's `Lambda runtime invoke` span),
    // captured from that formatter: the level first, padded to five (` WARN`).
    const regex = WEBHOOK_SECRET_UNREADABLE_PATTERN.match(/^%(.*)%$/)?.[1];
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

  test('the outputs', () => {
    const defaults = lazyDefaults();
    defaults.template.hasOutput('RegistryTableName', { Value: { Ref: logicalId(defaults, defaults.stack.table) } });
    defaults.template.hasOutput('ArtifactBucketName', { Value: { Ref: logicalId(defaults, defaults.stack.bucket) } });
    defaults.template.hasOutput('StateMachineArn', { Value: { Ref: logicalId(defaults, defaults.stack.stateMachine) } });
    assert.deepEqual(
      Object.keys(defaults.json.Outputs ?? {}).sort(),
      ['AnswerUrl', 'ArtifactBucketName', 'RegistryTableName', 'RequireRoleArn', 'ServiceRoleArns', 'StackNamePrefix', 'StateMachineArn', 'WebhookUrl'],
    );
    // template.yaml's outputs, the same.
    const yamlOutputs = TEMPLATE_YAML.split(/^Outputs:$/m)[1];
    assert.deepEqual([...yamlOutputs.matchAll(/^ {2}([A-Za-z]+):$/gm)].map((m) => m[1]).sort(), Object.keys(defaults.json.Outputs ?? {}).sort());
    // What the installation allows, for `stacksync apply` (an output cannot be empty: `*` any name, `-` no role).
    defaults.template.hasOutput('StackNamePrefix', { Value: 'stacksync-' });
    defaults.template.hasOutput('ServiceRoleArns', { Value: '-' });
    defaults.template.hasOutput('RequireRoleArn', { Value: 'true' });
    const full = lazyFull();
    full.template.hasOutput('StackNamePrefix', { Value: PREFIX });
    full.template.hasOutput('ServiceRoleArns', { Value: CFN_ROLES.join(',') });
    synth({ stackNamePrefix: '', requireRoleArn: false }).template.hasOutput('StackNamePrefix', { Value: '*' });
    assert.match(TEMPLATE_YAML, /\n {2}StackNamePrefix:\n {4}Description: .*\n {4}Value: !If \[AnyStackName, "\*", !Ref StackNamePrefix\]\n/);
    assert.match(TEMPLATE_YAML, /\n {2}ServiceRoleArns:\n {4}Description: .*\n {4}Value: !If \[CanPassRoles, !Join \[",", !Ref CloudFormationRoleArns\], "-"\]\n/);
    // WebhookUrl: the webhook's Function URL, as template.yaml (!GetAtt WebhookFunctionUrl.FunctionUrl).
    const urls = ofType(defaults.json, 'AWS::Lambda::Url');
    assert.equal(urls.length, 2, "the webhook's and the answer function's");
    const urlOf = (id: string) => urls.find(([logical]) => logical === logicalId(defaults, defaults.stack.functionUrls[id]))!;
    const [urlId, url] = urlOf('Webhook');
    defaults.template.hasOutput('WebhookUrl', {
      Description: 'the Git webhook endpoint (payload URL of a GitHub/GitLab/Bitbucket webhook)',
      Value: { 'Fn::GetAtt': [urlId, 'FunctionUrl'] },
    });
    assert.match(
      TEMPLATE_YAML,
      /WebhookUrl:\n +Description: the Git webhook endpoint \(payload URL of a GitHub\/GitLab\/Bitbucket webhook\)\n +Value: !GetAtt WebhookFunctionUrl\.FunctionUrl/,
    );
    const webhookId = logicalId(defaults, defaults.stack.functions.Webhook);
    assert.deepEqual(url.Properties, { AuthType: 'NONE', TargetFunctionArn: { 'Fn::GetAtt': [webhookId, 'Arn'] } });
    // AnswerUrl: the answer function's Function URL, IAM-authorised, as template.yaml (!GetAtt AnswerFunctionUrl.FunctionUrl).
    const [answerUrlId, answerUrl] = urlOf('Answer');
    const description = "the answer function's IAM-authorised URL, where stacksync approve and reject answer a waiting change set";
    defaults.template.hasOutput('AnswerUrl', { Description: description, Value: { 'Fn::GetAtt': [answerUrlId, 'FunctionUrl'] } });
    assert.ok(
      TEMPLATE_YAML.includes(`\n  AnswerUrl:\n    Description: ${description}\n    Value: !GetAtt AnswerFunctionUrl.FunctionUrl\n`),
      "template.yaml's AnswerUrl",
    );
    const answerId = logicalId(defaults, defaults.stack.functions.Answer);
    assert.deepEqual(answerUrl.Properties, { AuthType: 'AWS_IAM', TargetFunctionArn: { 'Fn::GetAtt': [answerId, 'Arn'] } });
  });

  test("only the webhook is public: its Function URL (auth NONE) and invoke permissions only through that URL; the answer function's URL is IAM-authorised, with no resource-based permission", () => {
    const defaults = lazyDefaults();
    const webhookId = logicalId(defaults, defaults.stack.functions.Webhook);
    assert.match(templateResource('WebhookFunction'), /FunctionUrlConfig:\n +AuthType: NONE\n/);
    // template.yaml: the answer function's URL is AWS_IAM (SAM makes no permission for it), the others have none.
    assert.match(templateResource('AnswerFunction'), /\n {6}FunctionUrlConfig:\n {8}AuthType: AWS_IAM\n/);
    assert.equal([...TEMPLATE_YAML.matchAll(/FunctionUrlConfig:/g)].length, 2);
    assert.deepEqual(
      FUNCTIONS.filter((f) => f.publicUrl || f.iamUrl).map((f) => [f.binary, f.publicUrl ? 'NONE' : 'AWS_IAM']),
      [['webhook', 'NONE'], ['answer', 'AWS_IAM']],
    );
    // The others are EventBridge's, each from one rule of the stack (checked with the rules).
    const permissions = ofType(defaults.json, 'AWS::Lambda::Permission')
      .map(([, r]) => r.Properties!)
      .filter((p) => p.Principal !== 'events.amazonaws.com');
    assert.deepEqual(
      permissions.sort((a, b) => String(a.Action).localeCompare(String(b.Action))),
      [
        { Action: 'lambda:InvokeFunction', FunctionName: { 'Fn::GetAtt': [webhookId, 'Arn'] }, InvokedViaFunctionUrl: true, Principal: '*' },
        { Action: 'lambda:InvokeFunctionUrl', FunctionName: { 'Fn::GetAtt': [webhookId, 'Arn'] }, FunctionUrlAuthType: 'NONE', Principal: '*' },
      ],
    );
  });

  test("the EventBridge rules: the scheduler's and the drift function's schedule, the events function's patterns (stacks by prefix, S3 by bucket), as template.yaml", () => {
    const stackArnPrefix = (prefix: string) => ({
      'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':cloudformation:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, `:stack/${prefix}`]],
    });
    const codeCommit = {
      source: ['aws.codecommit'],
      'detail-type': ['CodeCommit Repository State Change'],
      detail: { event: ['referenceCreated', 'referenceUpdated'] },
    };
    const stackStatus = (prefix: string) => ({
      source: ['aws.cloudformation'],
      'detail-type': ['CloudFormation Stack Status Change'],
      detail: { 'stack-id': [{ prefix: stackArnPrefix(prefix) }] },
    });
    // A reconcile execution that ended without its Catch still holds its stack: the events function releases it.
    const executionEnded = (s: Synth) => ({
      source: ['aws.states'],
      'detail-type': ['Step Functions Execution Status Change'],
      detail: { status: ['ABORTED', 'TIMED_OUT', 'FAILED'], stateMachineArn: [{ Ref: logicalId(s, s.stack.stateMachine) }] },
    });
    // Without source buckets there is no S3 rule at all (template.yaml: Condition HasSourceBuckets).
    for (const [s, prefix, buckets] of [[lazyDefaults(), 'stacksync-', []], [lazyFull(), PREFIX, SOURCE_BUCKETS]] as const) {
      const expected: Record<string, { fn: string; schedule?: string; pattern?: Record<string, unknown> }> = {
        SchedulerFunctionSchedule: { fn: 'Scheduler', schedule: s === lazyFull() ? 'rate(2 minutes)' : 'rate(5 minutes)' },
        // The drift function runs on the scheduler's schedule.
        DriftFunctionSchedule: { fn: 'Drift', schedule: s === lazyFull() ? 'rate(2 minutes)' : 'rate(5 minutes)' },
        EventsFunctionCodeCommitPush: { fn: 'Events', pattern: codeCommit },
        EventsFunctionStackStatusChange: { fn: 'Events', pattern: stackStatus(prefix) },
        EventsFunctionExecutionEnded: { fn: 'Events', pattern: executionEnded(s) },
      };
      if (buckets.length > 0) {
        expected.EventsFunctionS3ObjectCreated = {
          fn: 'Events',
          pattern: { source: ['aws.s3'], 'detail-type': ['Object Created'], detail: { bucket: { name: [...buckets] } } },
        };
      }
      const rules = Object.fromEntries(
        Object.entries(s.stack.rules).flatMap(([id, byName]) =>
          Object.entries(byName).map(([name, rule]) => [`${id}Function${name}`, { rule, logical: logicalId(s, rule) }]),
        ),
      );
      assert.deepEqual(Object.keys(rules).sort(), Object.keys(expected).sort());
      assert.equal(ofType(s.json, 'AWS::Events::Rule').length, Object.keys(expected).length);
      const eventPermissions = ofType(s.json, 'AWS::Lambda::Permission')
        .map(([, r]) => r.Properties!)
        .filter((p) => p.Principal === 'events.amazonaws.com');
      assert.equal(eventPermissions.length, Object.keys(expected).length, 'one per rule');
      for (const [name, want] of Object.entries(expected)) {
        const { logical } = rules[name];
        const p = s.json.Resources[logical].Properties!;
        const fnId = logicalId(s, s.stack.functions[want.fn]);
        assert.equal(p.State, 'ENABLED', name);
        assert.equal(p.EventBusName, undefined, `${name}: the default bus`);
        assert.equal(p.ScheduleExpression, want.schedule, name);
        assert.deepEqual(p.EventPattern, want.pattern, name);
        assert.deepEqual(p.Targets.map((t: any) => t.Arn), [{ 'Fn::GetAtt': [fnId, 'Arn'] }], `${name} targets ${want.fn}Function only`);
        // EventBridge may invoke the function from this rule only.
        const allowed = eventPermissions.filter((x) => JSON.stringify(x.SourceArn) === JSON.stringify({ 'Fn::GetAtt': [logical, 'Arn'] }));
        assert.equal(allowed.length, 1, name);
        assert.deepEqual(allowed[0].FunctionName, { 'Fn::GetAtt': [fnId, 'Arn'] }, name);
        assert.equal(allowed[0].Action, 'lambda:InvokeFunction', name);
      }
    }
    // template.yaml: the same rules (SAM names a function's event rule <Function><event>; the S3 rule is a resource
    // of its own, with a condition). tests/tests/template.rs compares the resolved patterns of both deployments.
    const events = templateResource('EventsFunction');
    assert.match(events, /\n {8}CodeCommitPush:\n {10}Type: EventBridgeRule\n/);
    assert.match(events, /\n {8}StackStatusChange:\n {10}Type: EventBridgeRule\n(.*\n)* +- prefix: !Sub "arn:\$\{AWS::Partition\}:cloudformation:\$\{AWS::Region\}:\$\{AWS::AccountId\}:stack\/\$\{StackNamePrefix\}"\n/);
    assert.doesNotMatch(events, /\n {8}S3ObjectCreated:\n/);
    const s3 = templateResource('EventsFunctionS3ObjectCreated');
    assert.match(s3, /\n {4}Condition: HasSourceBuckets\n/);
    assert.match(s3, /\n +name: !Ref SourceBucketNames\n/);
    assert.match(templateResource('EventsFunctionS3ObjectCreatedPermission'), /\n {4}Condition: HasSourceBuckets\n(.*\n)* +SourceArn: !GetAtt EventsFunctionS3ObjectCreated.Arn\n/);
    assert.match(templateResource('SchedulerFunction'), /\n {10}Type: Schedule\n(.*\n)* +Schedule: !Ref ScheduleExpression\n/);
    assert.match(templateResource('DriftFunction'), /\n {10}Type: Schedule\n(.*\n)* +Schedule: !Ref ScheduleExpression\n/);
    assert.match(TEMPLATE_YAML, /\n {2}ScheduleExpression:\n {4}Type: String\n {4}Default: rate\(5 minutes\)\n/);
    // A prop changes the schedule (of both).
    const s = synth({ scheduleExpression: 'cron(0/15 * * * ? *)' });
    const schedules = ofType(s.json, 'AWS::Events::Rule').filter(([, r]) => r.Properties!.ScheduleExpression);
    assert.equal(schedules.length, 2);
    for (const [, schedule] of schedules) assert.equal(schedule.Properties!.ScheduleExpression, 'cron(0/15 * * * ? *)');
  });
});

describe('IAM', () => {
  for (const [name, get] of [['defaults', lazyDefaults], ['all props', lazyFull]] as const) {
    test(`no wildcard actions; "*" resources only for log delivery, X-Ray, ListStacks, DescribeStackDriftDetectionStatus, answering task tokens and DriftReadGapsPolicy's reads (${name})`, () => {
      const s = get();
      const statements = identityStatements(s.json);
      assert.ok(statements.length > 0);
      for (const { statement, managedPolicy } of statements) {
        assert.equal(statement.Effect, 'Allow');
        for (const action of arr(statement.Action)) {
          assert.ok(!action.includes('*'), `wildcard action ${action}`);
        }
        if (managedPolicy !== undefined) {
          // The drift function's DriftReadGapsPolicy (with driftReadPolicy SecurityAudit): the read actions of
          // common resource types that SecurityAudit lacks, on `*` (checked with the managed policies).
          assert.match(managedPolicy, /^DriftReadGapsPolicy/);
          if (arr(statement.Resource).includes('*')) {
            for (const action of arr(statement.Action)) assert.ok(DRIFT_READ_GAPS.includes(action), action);
          }
          continue;
        }
        if (arr(statement.Resource).includes('*')) {
          for (const action of arr(statement.Action)) {
            // cloudformation:ListStacks (the scheduler's health check, the drift function's listing),
            // DescribeStackDriftDetectionStatus (the drift function's detections, by id) and states:SendTaskSuccess
            // and SendTaskFailure (the answer function's, by task token) have no resource-level permission.
            assert.match(
              action,
              /^(xray:|logs:(Create|Get|Update|Delete|List)LogDeliver|logs:(PutResourcePolicy|DescribeResourcePolicies|DescribeLogGroups)$|cloudformation:(ListStacks|DescribeStackDriftDetectionStatus)$|states:SendTask(Success|Failure)$)/,
            );
          }
        }
      }
    });
  }

  test('each role has exactly the actions of the README table (all props)', () => {
    const full = lazyFull();
    const readme = readmeIam();
    assert.deepEqual([...readme.keys()].sort(), FUNCTIONS.map((f) => f.binary).sort());
    for (const spec of FUNCTIONS) {
      assert.deepEqual(new Set(roleStatements(full, spec).flatMap((x) => x.actions)), readme.get(spec.binary), spec.binary);
    }
  });

  test('without props, a role has its statements that need none: those of all props but the optional ones', () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const spec of FUNCTIONS) {
      const required = roleStatements(full, spec).filter((x) => !OPTIONAL_SIDS.has(String(x.sid)));
      const without = roleStatements(defaults, spec);
      assert.deepEqual(without.map((x) => x.sid), required.map((x) => x.sid), spec.binary);
      // So an action of both kinds stays: artifact-fetch's s3:GetObject and s3:ListBucket on its artifact bucket.
      assert.deepEqual(new Set(without.flatMap((x) => x.actions)), new Set(required.flatMap((x) => x.actions)), spec.binary);
    }
  });

  test('each role has exactly the statements of template.yaml (all props)', () => {
    const full = lazyFull();
    const S = `STACKS:${PREFIX}*/*`;
    const pass = { sid: 'PassServiceRoles', actions: ['iam:PassRole'], resources: [...CFN_ROLES].sort(), condition: { StringEquals: { 'iam:PassedToService': 'cloudformation.amazonaws.com' } } };
    const assume = { sid: 'TargetAccounts', actions: ['sts:AssumeRole', 'sts:TagSession'], resources: TARGET_ROLES, condition: undefined };
    const st = (sid: string, actions: string[], resources: string[]) => ({ sid, actions: actions.sort(), resources: resources.sort(), condition: undefined });
    // Changes only to stacks no other installation tagged as its own; deletes only of its own.
    const tableName = { Ref: logicalId(full, full.stack.table) };
    const ours = { 'aws:ResourceTag/stacksync:installation': tableName };
    const own = (...actions: string[]) => ({ ...st('OwnStacks', actions, [S]), condition: { StringEqualsIfExists: ours } });
    // Items by key prefix, naming only these attributes, returning nothing of the item.
    const keys = (prefixes: string[], attributes: string[]) => ({
      'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': prefixes },
      'ForAllValues:StringEquals': { 'dynamodb:Attributes': attributes },
      StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
    });
    // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run writes
    // it (its status, its hold, when it is due), never its spec.
    const run = ['pk', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'leaseTakenAt', 'nextReconcileAt'];
    const readRegistry = {
      ...st('ReadRegistry', ['dynamodb:GetItem'], ['TABLE']),
      condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['stack#*', 'dependents#*'] } },
    };
    const registry = [readRegistry, { ...st('RecordRun', ['dynamodb:UpdateItem'], ['TABLE']), condition: keys(['stack#*'], run) }];
    // What a trigger reads of a source's followers: nothing of their specs.
    const followers = {
      ...st('SourceIndex', ['dynamodb:Query'], ['TABLE/index/by-source']),
      condition: {
        'ForAllValues:StringEquals': {
          'dynamodb:Attributes': ['pk', 'sourceKey', 'name', 'suspended', 'specSuspend', 'deletionRequestedAt', 'leaseExpiresAt', 'status', 'watch'],
        },
        StringEquals: { 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' },
      },
    };
    const s3 = (name: string) => `arn:<AWS::Partition>:s3:::${name}`;
    const sources = [
      st('SourceSecrets', ['secretsmanager:GetSecretValue'], [...SOURCE_SECRETS]),
      st('SourceParameters', ['ssm:GetParameter'], [...SOURCE_PARAMETERS]),
      st('SourceObjects', ['s3:GetObject', 's3:GetObjectVersion'], SOURCE_BUCKETS.map((b) => s3(`${b}/*`))),
      st('SourceBuckets', ['s3:ListBucket'], SOURCE_BUCKETS.map(s3)),
      st('CodeCommit', ['codecommit:GitPull'], [...CODECOMMIT_REPOSITORIES]),
    ];
    // The stacks' parameters read from Secrets Manager and SSM.
    const values = [
      st('ValueSecrets', ['secretsmanager:GetSecretValue'], [...VALUE_SECRETS]),
      st('ValueParameters', ['ssm:GetParameter'], [...VALUE_PARAMETERS]),
    ];
    // Every step tells what happens on the bus (template.yaml: with EventBusName other than none).
    const events = {
      ...st('Events', ['events:PutEvents'], ['arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:event-bus/default']),
      condition: { StringEquals: { 'events:source': 'stacksync' } },
    };
    const expected: Record<string, unknown[]> = {
      'artifact-fetch': [
        events,
        readRegistry,
        // artifact-fetch also records the names of the stacks that depend on another (dependents#).
        { ...st('RecordRun', ['dynamodb:UpdateItem'], ['TABLE']), condition: keys(['stack#*', 'dependents#*'], [...run, 'names']) },
        st('Artifacts', ['s3:GetObject', 's3:PutObject'], ['BUCKET/artifacts/*']),
        st('ArtifactExists', ['s3:ListBucket'], ['BUCKET']),
        ...sources,
      ],
      'template-upload': [
        events,
        ...registry,
        st('ReadArtifacts', ['s3:GetObject'], ['BUCKET/artifacts/*']),
        st('StoreTemplates', ['s3:GetObject', 's3:PutObject'], ['BUCKET/templates/*', 'BUCKET/parameters/*']),
        st('ObjectExists', ['s3:ListBucket'], ['BUCKET']),
        st('Stacks', ['cloudformation:DescribeStacks', 'cloudformation:GetTemplate', 'cloudformation:GetStackPolicy'], [S]),
        own('cloudformation:UpdateTerminationProtection', 'cloudformation:SetStackPolicy'),
        assume,
        ...values,
      ],
      'change-set': [
        events,
        ...registry,
        st('Templates', ['s3:GetObjectVersion'], ['BUCKET/templates/*']),
        st('Parameters', ['s3:GetObject'], ['BUCKET/parameters/*']),
        // An approved change set runs only with the answer function's verified record of the approval.
        st('VerifiedApprovals', ['s3:GetObject'], ['BUCKET/approvals/answers/*']),
        st('VerifiedApprovalExists', ['s3:ListBucket'], ['BUCKET']),
        st('Stacks', ['cloudformation:DescribeStacks', 'cloudformation:DescribeChangeSet', 'cloudformation:ListChangeSets', 'cloudformation:DescribeEvents', 'cloudformation:DescribeStackEvents', 'cloudformation:GetTemplate'], [S]),
        own('cloudformation:ExecuteChangeSet', 'cloudformation:TagResource', 'cloudformation:UntagResource', 'cloudformation:DeleteChangeSet', 'cloudformation:ContinueUpdateRollback'),
        {
          ...st('ChangeSets', ['cloudformation:CreateChangeSet'], [S]),
          condition: { StringEquals: { 'aws:RequestTag/stacksync:installation': tableName }, StringEqualsIfExists: ours },
        },
        st('Transforms', ['cloudformation:CreateChangeSet'], ['arn:<AWS::Partition>:cloudformation:*:aws:transform/*']),
        pass,
        assume,
        ...values,
      ],
      'poll-status': [
        events,
        ...registry,
        st('Parameters', ['s3:GetObject'], ['BUCKET/parameters/*']),
        st('Stacks', ['cloudformation:DescribeStacks', 'cloudformation:DescribeChangeSet', 'cloudformation:DescribeEvents', 'cloudformation:DescribeStackEvents', 'cloudformation:GetStackPolicy', 'cloudformation:GetTemplate'], [S]),
        own('cloudformation:DeleteChangeSet', 'cloudformation:UpdateTerminationProtection', 'cloudformation:SetStackPolicy'),
        assume,
        ...values,
      ],
      delete: [
        events,
        ...registry,
        // A removed entry (once its deletion was asked) and its claim on the stack's name.
        {
          ...st('ForgetEntry', ['dynamodb:DeleteItem'], ['TABLE']),
          condition: keys(['stack#*', 'claim#*'], ['pk', 'deletionRequestedAt', 'leaseOwner', 'name']),
        },
        st('Stacks', ['cloudformation:DescribeStacks', 'cloudformation:DescribeEvents', 'cloudformation:DescribeStackEvents'], [S]),
        own('cloudformation:UpdateTerminationProtection', 'cloudformation:DeleteStack'),
        pass,
        assume,
      ],
      // The wait's task token, kept where only the answer function reads it.
      approval: [st('KeepTokens', ['s3:PutObject'], ['BUCKET/approvals/tokens/*']), ...registry, events],
      finalize: [...registry, st('Stacks', ['cloudformation:DescribeChangeSet', 'cloudformation:DescribeStacks'], [S]), own('cloudformation:DeleteChangeSet'), assume, events],
      webhook: [
        { ...st('Deliveries', ['dynamodb:PutItem'], ['TABLE']), condition: keys(['delivery#*'], ['pk', 'expiresAt']) },
        followers,
        st('StartReconcile', ['states:StartExecution'], ['STATE_MACHINE']),
        st('Secret', ['secretsmanager:GetSecretValue'], [WEBHOOK_SECRET]),
      ],
      scheduler: [
        st('DueIndex', ['dynamodb:Query'], ['TABLE/index/by-next-reconcile']),
        followers,
        st('WatchIndex', ['dynamodb:Query'], ['TABLE/index/by-shard']),
        st('ListStacks', ['cloudformation:ListStacks'], ['*']),
        { ...st('MoveDue', ['dynamodb:UpdateItem'], ['TABLE']), condition: keys(['stack#*'], ['pk', 'nextReconcileAt']) },
        {
          ...st('RecordSources', ['dynamodb:UpdateItem'], ['TABLE']),
          condition: keys(['source#*'], ['pk', 'url', 'ref', 'schedShard', 'nextReconcileAt', 'head', 'followersCheckedAt', 'credentialsSecret']),
        },
        { ...st('ForgetSource', ['dynamodb:DeleteItem'], ['TABLE']), condition: keys(['source#*'], ['pk', 'head']) },
        st('StartReconcile', ['states:StartExecution'], ['STATE_MACHINE']),
        assume,
        ...sources,
      ],
      // No source, secret or execution: drift detection, its record and its notices.
      drift: [
        st('WatchIndex', ['dynamodb:Query'], ['TABLE/index/by-shard']),
        st('ListStacks', ['cloudformation:ListStacks'], ['*']),
        st('Drift', ['cloudformation:DetectStackDrift', 'cloudformation:DescribeStackResourceDrifts'], [S]),
        st('DriftDetections', ['cloudformation:DescribeStackDriftDetectionStatus'], ['*']),
        {
          ...st('RecordDrift', ['dynamodb:GetItem', 'dynamodb:UpdateItem'], ['TABLE']),
          condition: keys(['stack#*'], ['pk', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'nextReconcileAt']),
        },
        events,
        assume,
      ],
      events: [
        followers,
        st('StackNameIndex', ['dynamodb:Query'], ['TABLE/index/by-stack-name']),
        {
          ...st('MarkDue', ['dynamodb:GetItem', 'dynamodb:UpdateItem'], ['TABLE']),
          condition: keys(['stack#*'], ['pk', 'nextReconcileAt', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'leaseTakenAt']),
        },
        st('StartReconcile', ['states:StartExecution'], ['STATE_MACHINE']),
      ],
      // Entries read whole, only their status written (a refused approval); the tokens read, the verified answers
      // written; the tokens answered (no resource-level permission).
      answer: [
        {
          ...st('ReadEntries', ['dynamodb:GetItem'], ['TABLE']),
          condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['stack#*'] } },
        },
        { ...st('RecordRefusals', ['dynamodb:UpdateItem'], ['TABLE']), condition: keys(['stack#*'], ['pk', 'status']) },
        st('ReadTokens', ['s3:GetObject'], ['BUCKET/approvals/tokens/*']),
        st('TokenExists', ['s3:ListBucket'], ['BUCKET']),
        st('RecordAnswers', ['s3:PutObject'], ['BUCKET/approvals/answers/*']),
        st('AnswerTokens', ['states:SendTaskSuccess', 'states:SendTaskFailure'], ['*']),
      ],
    };
    const bySid = (a: any, b: any) => String(a.sid).localeCompare(String(b.sid));
    for (const spec of FUNCTIONS) {
      assert.deepEqual(roleStatements(full, spec).sort(bySid), [...expected[spec.binary]].sort(bySid), spec.binary);
    }
  });

  test("each role's statements are in template.yaml's order (all props)", () => {
    const full = lazyFull();
    for (const spec of FUNCTIONS) {
      assert.deepEqual(roleStatements(full, spec).map((x) => String(x.sid)), yamlSids(spec.id), spec.binary);
    }
  });

  test("the steps read their run's entry whole and write only what a run writes, never a spec (ReadRegistry, RecordRun; delete's ForgetEntry), as template.yaml", () => {
    // What template.yaml's statement `sid` of `${id}Function` says: its action and each condition's values.
    const list = (text: string) => text.split(',').map((x) => x.trim().replace(/^"(.*)"$/, '$1'));
    const yamlStatement = (id: string, sid: string) => {
      const m = templateResource(`${id}Function`).match(
        new RegExp(
          `\\n +- Sid: ${sid}\\n +Effect: Allow\\n +Action: (dynamodb:[A-Za-z]+)\\n +Resource: !GetAtt RegistryTable\\.Arn\\n +Condition:\\n` +
            '((?: +"?[A-Za-z:]+"?: \\{ "dynamodb:[A-Za-z]+": .* \\}\\n)+)',
        ),
      );
      assert.ok(m, `template.yaml: ${id}Function has ${sid}`);
      const conditions: Record<string, Record<string, string[] | string>> = {};
      for (const [, operator, key, value] of m[2].matchAll(/ +"?([A-Za-z:]+)"?: \{ "(dynamodb:[A-Za-z]+)": (.*) \}\n/g)) {
        const values = value.startsWith('[') ? list(value.slice(1, -1)) : value;
        conditions[operator] = { [key]: values };
      }
      return { actions: [m[1]], conditions };
    };
    const run = ['pk', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'leaseTakenAt', 'nextReconcileAt'];
    const written = (prefixes: string[], attributes: string[]) => ({
      'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': prefixes },
      'ForAllValues:StringEquals': { 'dynamodb:Attributes': attributes },
      StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
    });
    for (const s of [lazyDefaults(), lazyFull()]) {
      for (const spec of STEPS) {
        const expected: Record<string, { actions: string[]; conditions: unknown }> = {
          ReadRegistry: { actions: ['dynamodb:GetItem'], conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['stack#*', 'dependents#*'] } } },
          // artifact-fetch also records the names of the stacks that depend on another (dependents#).
          RecordRun:
            spec.id === 'ArtifactFetch'
              ? { actions: ['dynamodb:UpdateItem'], conditions: written(['stack#*', 'dependents#*'], [...run, 'names']) }
              : { actions: ['dynamodb:UpdateItem'], conditions: written(['stack#*'], run) },
        };
        if (spec.id === 'Delete') {
          expected.ForgetEntry = {
            actions: ['dynamodb:DeleteItem'],
            conditions: written(['stack#*', 'claim#*'], ['pk', 'deletionRequestedAt', 'leaseOwner', 'name']),
          };
        }
        // Every DynamoDB statement of a step is one of these: none unconditioned, none on another kind of item.
        const table = roleStatements(s, spec).filter((x) => x.actions.some((a) => a.startsWith('dynamodb:')));
        assert.deepEqual(table.map((x) => x.sid).sort(), Object.keys(expected).sort(), spec.binary);
        for (const x of table) {
          const want = expected[String(x.sid)];
          assert.deepEqual(x.actions, want.actions, `${spec.binary} ${x.sid}`);
          assert.deepEqual(x.resources, ['TABLE'], `${spec.binary} ${x.sid}`);
          assert.deepEqual(x.condition, want.conditions, `${spec.binary} ${x.sid}`);
          // template.yaml's statement, the same.
          assert.deepEqual(yamlStatement(spec.id, String(x.sid)), { actions: want.actions, conditions: want.conditions }, `template.yaml: ${spec.binary} ${x.sid}`);
        }
        // In the role as in template.yaml, in the same order (the approval function's KeepTokens comes first).
        assert.deepEqual(
          roleStatements(s, spec).map((x) => String(x.sid)).filter((sid) => sid in expected),
          yamlSids(spec.id).filter((sid) => sid in expected),
          spec.binary,
        );
        assert.deepEqual(yamlSids(spec.id).filter((sid) => sid in expected), Object.keys(expected), spec.binary);
      }
    }
    // The unconditioned Registry statement is gone from every step of template.yaml.
    for (const spec of STEPS) assert.doesNotMatch(templateResource(`${spec.id}Function`), /Sid: Registry\n/, spec.binary);
  });

  test('approvals: only the approval function keeps task tokens, only the answer function reads them, records verified answers and answers tokens; change-set reads the answers; as template.yaml', () => {
    for (const s of [lazyDefaults(), lazyFull()]) {
      const bucket = `<${logicalId(s, s.stack.bucket)}.Arn>`;
      const roleOf = Object.fromEntries(FUNCTIONS.map((f) => [logicalId(s, s.stack.functions[f.id].role as any), f.binary]));
      const grants = (test: (x: { statement: Statement }) => boolean) =>
        identityStatements(s.json)
          .filter(test)
          .map(({ roles, statement }) => [roles.map((r) => roleOf[r] ?? r).join(','), statement.Sid, arr(statement.Action).sort().join(',')]);
      const onPrefix = (prefix: string) => (x: { statement: Statement }) =>
        arr(x.statement.Resource).some((r) => nagFinding(r) === `${bucket}/${prefix}`);
      assert.deepEqual(grants(onPrefix('approvals/tokens/*')), [
        ['approval', 'KeepTokens', 's3:PutObject'],
        ['answer', 'ReadTokens', 's3:GetObject'],
      ]);
      assert.deepEqual(grants(onPrefix('approvals/answers/*')), [
        ['change-set', 'VerifiedApprovals', 's3:GetObject'],
        ['answer', 'RecordAnswers', 's3:PutObject'],
      ]);
      // No other grant reaches approvals/ (a bucket-wide object ARN, say).
      assert.deepEqual(grants((x) => arr(x.statement.Resource).some((r) => nagFinding(r) === `${bucket}/*`)), []);
      assert.deepEqual(grants((x) => arr(x.statement.Action).some((a) => a.startsWith('states:SendTask'))), [
        ['answer', 'AnswerTokens', 'states:SendTaskFailure,states:SendTaskSuccess'],
      ]);
      // The answer function reads entries whole (stack# only) and writes only their status, returning nothing.
      const answer = roleStatements(s, FUNCTIONS.find((f) => f.binary === 'answer')!).filter((x) => x.actions.some((a) => a.startsWith('dynamodb:')));
      assert.deepEqual(answer, [
        { sid: 'ReadEntries', actions: ['dynamodb:GetItem'], resources: ['TABLE'], condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['stack#*'] } } },
        {
          sid: 'RecordRefusals',
          actions: ['dynamodb:UpdateItem'],
          resources: ['TABLE'],
          condition: {
            'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['stack#*'] },
            'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['pk', 'status'] },
            StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
          },
        },
      ]);
    }
    // template.yaml: the same statements in the same functions.
    const sidsOn = (prefix: string) =>
      FUNCTIONS.flatMap((f) =>
        [...templateResource(`${f.id}Function`).matchAll(new RegExp(`- Sid: ([A-Za-z]+)\\n +Effect: Allow\\n +Action: (s3:[A-Za-z]+)\\n +Resource: !Sub "\\$\\{ArtifactBucket\\.Arn\\}/${prefix}"\\n`, 'g'))].map(
          (m) => [f.binary, m[1], m[2]],
        ),
      );
    assert.deepEqual(sidsOn('approvals/tokens/\\*'), [['approval', 'KeepTokens', 's3:PutObject'], ['answer', 'ReadTokens', 's3:GetObject']]);
    assert.deepEqual(sidsOn('approvals/answers/\\*'), [['change-set', 'VerifiedApprovals', 's3:GetObject'], ['answer', 'RecordAnswers', 's3:PutObject']]);
    assert.match(
      templateResource('AnswerFunction'),
      /\n +- Sid: AnswerTokens\n +Effect: Allow\n(?: +#.*\n)* +Action: \[states:SendTaskSuccess, states:SendTaskFailure\]\n +Resource: "\*"\n/,
    );
    assert.equal([...TEMPLATE_YAML.matchAll(/states:SendTask/g)].length, 2, 'the answer function only');
  });

  test('a role also writes only its own log group (and X-Ray traces)', () => {
    const defaults = lazyDefaults();
    for (const spec of FUNCTIONS) {
      const roleId = logicalId(defaults, defaults.stack.functions[spec.id].role as any);
      const fn = defaults.json.Resources[logicalId(defaults, defaults.stack.functions[spec.id])];
      const own = identityStatements(defaults.json).filter((x) => x.roles.includes(roleId) && x.statement.Sid === 'OwnLogs');
      assert.equal(own.length, 1);
      assert.deepEqual(arr(own[0].statement.Action).sort(), ['logs:CreateLogStream', 'logs:PutLogEvents']);
      assert.deepEqual(own[0].statement.Resource, { 'Fn::GetAtt': [fn.Properties!.LoggingConfig.LogGroup.Ref, 'Arn'] });
    }
  });

  test("managed policies: only the drift function's role (never the scheduler's), the driftReadPolicy AWS managed policy (SecurityAudit by default; none: none) and, with SecurityAudit, DriftReadGapsPolicy, as template.yaml", () => {
    // template.yaml: the policy's ARN in the drift function's Policies under the ReadsForDrift condition, then the
    // gaps policy under FillsSecurityAuditGaps; the scheduler, which reaches every Git server, has none.
    const driftYaml = templateResource('DriftFunction');
    const yaml = driftYaml.match(/\n +- !If\n +- ReadsForDrift\n +- !Sub "(.*)"\n +- !Ref AWS::NoValue\n +- !If\n +- FillsSecurityAuditGaps\n +- !Ref DriftReadGapsPolicy\n +- !Ref AWS::NoValue\n/)?.[1];
    assert.ok(yaml, 'template.yaml: the drift function attaches the DriftReadPolicy under ReadsForDrift, then DriftReadGapsPolicy under FillsSecurityAuditGaps');
    assert.doesNotMatch(templateResource('SchedulerFunction'), /ReadsForDrift|DriftReadPolicy|DriftReadGapsPolicy/);
    assert.match(TEMPLATE_YAML, /\n {2}ReadsForDrift: !Not \[!Equals \[!Ref DriftReadPolicy, none\]\]\n/);
    assert.match(TEMPLATE_YAML, /\n {2}FillsSecurityAuditGaps: !Equals \[!Ref DriftReadPolicy, SecurityAudit\]\n/);
    // template.yaml's DriftReadGapsPolicy: its condition, description and two statements.
    const gapsYaml = templateResource('DriftReadGapsPolicy');
    assert.match(gapsYaml, /\n {4}Type: AWS::IAM::ManagedPolicy\n {4}Condition: FillsSecurityAuditGaps\n/);
    assert.doesNotMatch(gapsYaml, /ManagedPolicyName|Roles:|Groups:|Users:/, 'named by CloudFormation, attached by the function');
    const gapsDescription = gapsYaml.match(/\n {6}Description: (.*)\n/)?.[1];
    const gapsActions = gapsYaml.match(/\n +- Sid: ReadHandlersBeyondSecurityAudit\n +Effect: Allow\n +Action:\n((?: +- [a-z0-9-]+:[A-Za-z]+\n)+) +Resource: "\*"\n/)?.[1];
    const apis = gapsYaml.match(/\n +- Sid: ApiGatewayApis\n +Effect: Allow\n +Action: apigateway:GET\n +Resource:\n((?: +- !Sub ".*"\n)+)/)?.[1];
    assert.ok(gapsDescription && gapsActions && apis, 'template.yaml: DriftReadGapsPolicy with its description and statements');
    assert.equal([...gapsYaml.matchAll(/- Sid: /g)].length, 2, 'two statements');
    const yamlActions = [...gapsActions.matchAll(/- ([a-z0-9-]+:[A-Za-z]+)\n/g)].map((m) => m[1]);
    assert.deepEqual(DRIFT_READ_GAPS, yamlActions);
    const yamlApis = [...apis.matchAll(/- !Sub "(.*)"\n/g)].map((m) => nagFinding(m[1]));

    const arn = (name: string) => nagFinding(yaml.replace('${DriftReadPolicy}', name));
    for (const [s, policies, gaps] of [
      [lazyDefaults(), [arn('SecurityAudit')], true],
      [lazyFull(), [arn('job-function/ViewOnlyAccess')], false],
      [synth({ driftReadPolicy: 'ReadOnlyAccess' }), [arn('ReadOnlyAccess')], false],
      [synth({ driftReadPolicy: 'none' }), [], false],
    ] as const) {
      const drift = logicalId(s, s.stack.functions.Drift.role as any);
      const customer = ofType(s.json, 'AWS::IAM::ManagedPolicy');
      assert.equal(customer.length, gaps ? 1 : 0, 'DriftReadGapsPolicy, with SecurityAudit only');
      const attachedCustomer = customer.map(([id]) => `<${id}>`);
      const withPolicies = ofType(s.json, 'AWS::IAM::Role').filter(([, r]) => r.Properties?.ManagedPolicyArns);
      assert.deepEqual(withPolicies.map(([id]) => id), policies.length === 0 ? [] : [drift]);
      const attached = arr(s.json.Resources[drift].Properties?.ManagedPolicyArns).map(nagFinding);
      assert.deepEqual(attached, [...policies, ...attachedCustomer]);
      // cdk-nag's AwsSolutions-IAM4 (an AWS managed policy) suppressed for exactly that policy, with the reason.
      const iam4 = arr<{ id: string; reason: string; applies_to?: string[] }>(s.json.Resources[drift].Metadata?.cdk_nag?.rules_to_suppress).filter(
        (x) => x.id === 'AwsSolutions-IAM4',
      );
      assert.deepEqual(iam4.flatMap((x) => x.applies_to ?? []), policies.map((p) => `Policy::${p}`));
      for (const x of iam4) assert.match(x.reason, /caller's credentials.*driftReadPolicy.*'none' attaches nothing/s);
      if (!gaps) continue;
      // The gaps policy: template.yaml's description and statements; CloudFormation names it; attached by the role.
      const [, policy] = customer[0];
      const p = policy.Properties!;
      assert.equal(p.Description, gapsDescription);
      assert.equal(p.ManagedPolicyName, undefined);
      for (const key of ['Roles', 'Groups', 'Users']) assert.equal(p[key], undefined, key);
      const statements = arr<Statement>(p.PolicyDocument.Statement).map((x) => ({
        sid: x.Sid,
        effect: x.Effect,
        actions: arr(x.Action).sort(),
        resources: arr(x.Resource).map(nagFinding).sort(),
        condition: x.Condition,
      }));
      // (The synthesis sorts actions and resources.)
      assert.deepEqual(statements, [
        { sid: 'ReadHandlersBeyondSecurityAudit', effect: 'Allow', actions: [...yamlActions].sort(), resources: ['*'], condition: undefined },
        { sid: 'ApiGatewayApis', effect: 'Allow', actions: ['apigateway:GET'], resources: [...yamlApis].sort(), condition: undefined },
      ]);
      // Read actions only (Get, List, Describe; apigateway:GET).
      for (const { actions } of statements) for (const a of actions) assert.match(a, /^[a-z0-9-]+:(Get|List|Describe|GET$)/, a);
      // Its wildcard resources: one AwsSolutions-IAM5 suppression each, with the reason.
      const iam5 = arr<{ id: string; reason: string; applies_to?: string[] }>(policy.Metadata?.cdk_nag?.rules_to_suppress);
      assert.deepEqual(iam5.map((x) => x.id), iam5.map(() => 'AwsSolutions-IAM5'));
      assert.deepEqual(iam5.flatMap((x) => x.applies_to ?? []).sort(), ['*', ...yamlApis].map((r) => `Resource::${r}`).sort());
      for (const x of iam5) assert.match(x.reason, /caller's credentials.*SecurityAudit lacks.*DriftReadGapsPolicy/s);
    }
  });

  test('iam:PassRole only to the given service roles, only to CloudFormation; none without them', () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const [s, roles] of [[full, CFN_ROLES], [defaults, []]] as const) {
      const pass = identityStatements(s.json).filter((x) => arr(x.statement.Action).includes('iam:PassRole'));
      assert.equal(pass.length, roles.length === 0 ? 0 : 2, 'change-set and delete');
      for (const { statement } of pass) {
        assert.deepEqual(arr(statement.Action), ['iam:PassRole']);
        assert.deepEqual(arr(statement.Resource).sort(), [...roles].sort());
        assert.deepEqual(statement.Condition, { StringEquals: { 'iam:PassedToService': 'cloudformation.amazonaws.com' } });
      }
      const assume = identityStatements(s.json).filter((x) => arr(x.statement.Action).some((a) => a.startsWith('sts:')));
      assert.equal(assume.length, s === full ? 7 : 0, 'template-upload, change-set, poll-status, delete, finalize, scheduler, drift');
      for (const { statement } of assume) {
        // The sessions are tagged (the entry, the installation): sts:TagSession with sts:AssumeRole.
        assert.equal(statement.Sid, 'TargetAccounts');
        assert.deepEqual(arr(statement.Action), ['sts:AssumeRole', 'sts:TagSession']);
        assert.deepEqual(arr(statement.Resource), TARGET_ROLES);
      }
    }
    // template.yaml: the same statement in the same seven roles, each under CanAssumeRoles.
    const targetAccounts = /\n +- !If\n +- CanAssumeRoles\n +- \{ Sid: TargetAccounts, Effect: Allow, Action: \[sts:AssumeRole, sts:TagSession\], Resource: !Ref TargetAccountRoleArns \}\n +- !Ref AWS::NoValue\n/;
    for (const id of ['TemplateUpload', 'ChangeSet', 'PollStatus', 'Delete', 'Finalize', 'Scheduler', 'Drift']) {
      assert.match(templateResource(`${id}Function`), targetAccounts, id);
    }
    assert.equal([...TEMPLATE_YAML.matchAll(/Sid: TargetAccounts,/g)].length, 7);
  });

  test('the webhook reads its secret only when one is given (template.yaml: HasWebhookSecret)', () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    assert.match(
      templateResource('WebhookFunction'),
      /- !If\n +- HasWebhookSecret\n +- \{ Sid: Secret, Effect: Allow, Action: secretsmanager:GetSecretValue, Resource: !Ref WebhookSecretArn \}\n +- !Ref AWS::NoValue/,
    );
    for (const [s, secrets] of [[full, [WEBHOOK_SECRET]], [defaults, []]] as const) {
      // Besides the private sources' Git credentials (SourceSecrets) and the stacks' parameters (ValueSecrets), below.
      const found = identityStatements(s.json).filter(
        (x) =>
          !['SourceSecrets', 'ValueSecrets'].includes(String(x.statement.Sid)) &&
          arr(x.statement.Action).some((a) => a.startsWith('secretsmanager:')),
      );
      assert.equal(found.length, secrets.length, 'the webhook role only');
      for (const { roles, statement } of found) {
        assert.deepEqual(roles, [logicalId(s, s.stack.functions.Webhook.role as any)]);
        assert.equal(statement.Sid, 'Secret');
        assert.deepEqual(arr(statement.Action), ['secretsmanager:GetSecretValue']);
        assert.deepEqual(arr(statement.Resource), secrets);
      }
    }
  });

  test('private sources: only artifact-fetch and the scheduler read them, last in their roles, only with props', () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const [s, withProps] of [[full, true], [defaults, false]] as const) {
      const readers = [s.stack.functions.ArtifactFetch, s.stack.functions.Scheduler].map((f) => logicalId(s, f.role as any));
      // (The drift function's DriftReadGapsPolicy aside: read actions drift detection needs, such as S3 bucket
      // settings, checked with the managed policies.)
      const inline = identityStatements(s.json).filter((x) => x.managedPolicy === undefined);
      const found = inline.filter(
        (x) =>
          SOURCE_SIDS.includes(String(x.statement.Sid)) ||
          // (change-set's `Templates` reads the artifact bucket's templates by version, not sources; the stacks'
          // parameters from SSM are the ValueParameters statements, below.)
          (!['Templates', 'ValueParameters'].includes(String(x.statement.Sid)) &&
            arr(x.statement.Action).some((a) => /^(ssm|codecommit):|^s3:GetObjectVersion$/.test(a))),
      );
      assert.equal(found.length, withProps ? 2 * SOURCE_SIDS.length : 0);
      for (const { roles, statement } of found) assert.ok(roles.length === 1 && readers.includes(roles[0]), statement.Sid);
      // S3 beyond the artifact bucket: the source buckets only.
      const artifactBucket = `<${logicalId(s, s.stack.bucket)}.Arn>`;
      for (const { statement } of inline.filter((x) => arr(x.statement.Action).some((a) => a.startsWith('s3:')))) {
        const outside = arr(statement.Resource).map(nagFinding).filter((r) => !r.startsWith(artifactBucket));
        if (outside.length > 0) assert.ok(['SourceObjects', 'SourceBuckets'].includes(String(statement.Sid)), `${statement.Sid}: ${outside}`);
      }
    }
    // In template.yaml's order, after the statements of the function's own.
    for (const spec of FUNCTIONS.filter((f) => f.id === 'ArtifactFetch' || f.id === 'Scheduler')) {
      assert.deepEqual(roleStatements(full, spec).slice(-SOURCE_SIDS.length).map((x) => x.sid), SOURCE_SIDS, spec.binary);
    }
  });

  test("the stacks' parameters: only template-upload, change-set and poll-status read them, last in their roles, only with props", () => {
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const [s, withProps] of [[full, true], [defaults, false]] as const) {
      const readers = VALUE_READERS.map((id) => logicalId(s, s.stack.functions[id].role as any));
      const found = identityStatements(s.json).filter((x) => VALUE_SIDS.includes(String(x.statement.Sid)));
      assert.equal(found.length, withProps ? VALUE_READERS.length * VALUE_SIDS.length : 0);
      for (const { roles, statement } of found) {
        assert.ok(roles.length === 1 && readers.includes(roles[0]), statement.Sid);
        const [action, arns] = statement.Sid === 'ValueSecrets' ? ['secretsmanager:GetSecretValue', VALUE_SECRETS] : ['ssm:GetParameter', VALUE_PARAMETERS];
        assert.deepEqual(arr(statement.Action), [action], statement.Sid);
        assert.deepEqual(arr(statement.Resource), arns, statement.Sid);
        assert.equal(statement.Condition, undefined, statement.Sid);
      }
    }
    // In template.yaml's order, after the statements of the function's own, each under its condition.
    for (const spec of FUNCTIONS.filter((f) => VALUE_READERS.includes(f.id))) {
      assert.deepEqual(roleStatements(full, spec).slice(-VALUE_SIDS.length).map((x) => x.sid), VALUE_SIDS, spec.binary);
      assert.match(
        templateResource(`${spec.id}Function`),
        /- !If\n +- HasValueSecrets\n +- \{ Sid: ValueSecrets, Effect: Allow, Action: secretsmanager:GetSecretValue, Resource: !Ref ValueSecretArns \}\n +- !Ref AWS::NoValue\n +- !If\n +- HasValueParameters\n +- \{ Sid: ValueParameters, Effect: Allow, Action: ssm:GetParameter, Resource: !Ref ValueParameterArns \}\n +- !Ref AWS::NoValue\n*$/,
        spec.binary,
      );
    }
    assert.match(TEMPLATE_YAML, /\n {2}HasValueSecrets: !Not \[!Equals \[!Join \["", !Ref ValueSecretArns\], ""\]\]\n/);
    assert.match(TEMPLATE_YAML, /\n {2}HasValueParameters: !Not \[!Equals \[!Join \["", !Ref ValueParameterArns\], ""\]\]\n/);
    for (const parameter of ['ValueSecretArns', 'ValueParameterArns']) {
      assert.match(TEMPLATE_YAML, new RegExp(`\n {2}${parameter}:\n {4}Type: CommaDelimitedList\n {4}Default: ""\n`), parameter);
    }
  });

  test('CloudFormation actions only on stack/<prefix>*/*, CreateChangeSet on the AWS-owned transforms (change-set only), ListStacks (scheduler and drift) and DescribeStackDriftDetectionStatus (drift only)', () => {
    // finalize: the failed run's unexecuted change set is deleted.
    const defaults = lazyDefaults();
    const full = lazyFull();
    for (const [s, prefix] of [[full, PREFIX], [defaults, 'stacksync-']] as const) {
      const cfn = identityStatements(s.json).filter(
        (x) =>
          arr(x.statement.Action).some((a) => a.startsWith('cloudformation:')) &&
          x.statement.Sid !== 'Transforms' &&
          x.statement.Sid !== 'ListStacks' &&
          x.statement.Sid !== 'DriftDetections',
      );
      const withStacks = new Set(cfn.flatMap((x) => x.roles));
      assert.equal(withStacks.size, 6, 'template-upload, change-set, poll-status, delete, finalize, drift');
      // Stacks (reads), OwnStacks (changes) in each step; ChangeSets in change-set; Drift in the drift function.
      assert.equal(cfn.length, 12);
      const role = (id: string) => logicalId(s, s.stack.functions[id].role as any);
      assert.deepEqual(cfn.filter((x) => x.roles.includes(role('Drift'))).map((x) => x.statement.Sid), ['Drift']);
      // The scheduler starts no drift detection any more: only its health check's listing.
      assert.deepEqual(cfn.filter((x) => x.roles.includes(role('Scheduler'))), []);
      for (const [sid, action, ids] of [
        ['ListStacks', 'cloudformation:ListStacks', ['Scheduler', 'Drift']],
        ['DriftDetections', 'cloudformation:DescribeStackDriftDetectionStatus', ['Drift']],
      ] as const) {
        const found = identityStatements(s.json).filter((x) => x.statement.Sid === sid);
        assert.deepEqual(found.flatMap((x) => x.roles).sort(), ids.map(role).sort(), sid);
        for (const { statement } of found) {
          assert.deepEqual(arr(statement.Action), [action]);
          assert.deepEqual(arr(statement.Resource), ['*']);
        }
      }
      for (const { statement } of cfn) {
        assert.ok(arr(statement.Action).every((a) => a.startsWith('cloudformation:')));
        assert.deepEqual(arr(statement.Resource).map(nagFinding), [
          `arn:<AWS::Partition>:cloudformation:*:<AWS::AccountId>:stack/${prefix}*/*`,
        ]);
      }
      const transforms = identityStatements(s.json).filter((x) => x.statement.Sid === 'Transforms');
      assert.equal(transforms.length, 1, 'change-set only');
      assert.deepEqual(transforms[0].roles, [logicalId(s, s.stack.functions.ChangeSet.role as any)]);
      assert.deepEqual(arr(transforms[0].statement.Action), ['cloudformation:CreateChangeSet']);
      assert.deepEqual(arr(transforms[0].statement.Resource).map(nagFinding), ['arn:<AWS::Partition>:cloudformation:*:aws:transform/*']);
    }
  });
});

describe('cdk-nag (AwsSolutions)', () => {
  for (const [name, get] of [['defaults', lazyDefaults], ['all props', lazyFull]] as const) {
    test(`no unsuppressed errors or warnings (${name})`, () => {
      const s = get();
      const annotations = Annotations.fromStack(s.stack);
      const findings = [
        ...annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')),
        ...annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')),
      ].map((m) => `${m.id}: ${String(m.entry.data).split('\n')[0]}`);
      assert.deepEqual(findings, []);
    });
  }

  test("wildcards the operator wrote into the private sources' and the stack parameters' ARNs are suppressed as the operator's own pattern", () => {
    const patterns = {
      sourceSecretArns: ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/*', 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:git-token-??????'],
      sourceParameterArns: ['arn:aws:ssm:eu-west-1:111122223333:parameter/stacksync/git/*'],
      codeCommitRepositoryArns: ['arn:aws:codecommit:eu-west-1:111122223333:infra-*'],
    };
    // The same pattern in a private source's list and a stack parameter's: each role names its own.
    const values = {
      valueSecretArns: ['arn:aws:secretsmanager:eu-west-1:111122223333:secret:app/*', 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:stacksync/git/*'],
      valueParameterArns: ['arn:aws:ssm:eu-west-1:111122223333:parameter/app/*'],
    };
    const s = synth({ ...patterns, ...values, sourceBucketNames: SOURCE_BUCKETS });
    const annotations = Annotations.fromStack(s.stack);
    const findings = [
      ...annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')),
      ...annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')),
    ];
    assert.deepEqual(findings, []);
    for (const fn of [s.stack.functions.ArtifactFetch, s.stack.functions.Scheduler]) {
      const role = s.json.Resources[logicalId(s, fn.role as any)];
      const iam5 = arr<{ id: string; reason: string; applies_to?: string[] }>(role.Metadata?.cdk_nag?.rules_to_suppress).filter(
        (x) => x.id === 'AwsSolutions-IAM5',
      );
      const reason = (resource: string) => iam5.find((x) => x.applies_to?.includes(`Resource::${resource}`))?.reason ?? '';
      for (const [prop, arns] of Object.entries(patterns)) {
        // Only `*` is a finding (cdk-nag reads `?` as no wildcard).
        for (const arn of arns.filter((a) => a.includes('*'))) assert.match(reason(arn), new RegExp(`operator's own pattern, written into ${prop}`));
      }
      for (const b of SOURCE_BUCKETS) assert.match(reason(`arn:<AWS::Partition>:s3:::${b}/*`), new RegExp(`Objects of ${b}, a source bucket`));
    }
    for (const fn of VALUE_READERS.map((id) => s.stack.functions[id])) {
      const role = s.json.Resources[logicalId(s, fn.role as any)];
      const iam5 = arr<{ id: string; reason: string; applies_to?: string[] }>(role.Metadata?.cdk_nag?.rules_to_suppress).filter(
        (x) => x.id === 'AwsSolutions-IAM5',
      );
      const reason = (resource: string) => iam5.find((x) => x.applies_to?.includes(`Resource::${resource}`))?.reason ?? '';
      for (const [prop, arns] of Object.entries(values)) {
        for (const arn of arns) assert.match(reason(arn), new RegExp(`operator's own pattern, written into ${prop}: .*the stacks' parameters`));
      }
    }
  });

  test("the answer function's and the approvals' wildcards have reasons of their own", () => {
    const s = lazyDefaults();
    const bucket = `<${logicalId(s, s.stack.bucket)}.Arn>`;
    const iam5 = (id: string) =>
      arr<{ id: string; reason: string; applies_to?: string[] }>(
        s.json.Resources[logicalId(s, s.stack.functions[id].role as any)].Metadata?.cdk_nag?.rules_to_suppress,
      ).filter((x) => x.id === 'AwsSolutions-IAM5');
    const reason = (id: string, resource: string) =>
      iam5(id)
        .filter((x) => x.applies_to?.includes(`Resource::${resource}`))
        .map((x) => x.reason)
        .join(' ');
    assert.match(reason('Answer', '*'), /SendTaskSuccess and states:SendTaskFailure name a task token.*no resource-level permission.*secrecy/s);
    assert.match(reason('Answer', '*'), /xray:PutTraceSegments/, 'and X-Ray, as every role');
    for (const [id, prefix] of [['Answer', 'approvals/tokens/*'], ['Answer', 'approvals/answers/*'], ['Approval', 'approvals/tokens/*'], ['ChangeSet', 'approvals/answers/*']]) {
      assert.match(reason(id, `${bucket}/${prefix}`), new RegExp(`Objects under ${prefix.replace('*', '\\*')} .*one per approval wait`), `${id} ${prefix}`);
    }
  });

  test('every suppression has a specific reason, and IAM5 suppressions name their findings', () => {
    const full = lazyFull();
    const suppressions = Object.values(full.json.Resources).flatMap((r) =>
      arr<{ id: string; reason: string; applies_to?: unknown[] }>(r.Metadata?.cdk_nag?.rules_to_suppress),
    );
    assert.ok(suppressions.length > 0);
    for (const sup of suppressions) {
      assert.ok(sup.reason.length >= 80, `${sup.id}: a specific reason, not "${sup.reason}"`);
      if (sup.id === 'AwsSolutions-IAM5') assert.ok(sup.applies_to && sup.applies_to.length > 0, 'IAM5 with appliesTo');
    }
    assert.equal(Stack.of(full.stack).templateOptions.metadata?.cdk_nag, undefined, 'no stack-wide suppressions');
  });
});
