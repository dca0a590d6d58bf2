// The stacksync stack: ../../template.yaml (SAM), included as it is.
//
// template.yaml is the one description of the installation: the registry, the artifact bucket, the functions and
// their roles, the state machine, the triggers, the alarms and the outputs. This stack includes it with CDK's
// CfnInclude, the SAM transform kept (CloudFormation expands it when it deploys the stack, as for `sam deploy`), and
// changes only what `sam build` and `sam package` would: each function's CodeUri becomes a CDK asset of its binary
// (built by cargo-lambda, as `BuildMethod: rust-cargolambda`), the state machine's DefinitionUri an asset of its ASL
// file. The typed props are template.yaml's parameters (`stackNamePrefix` is `StackNamePrefix`, ...): each is
// checked against the parameter's constraints when the stack is synthesized, then put in its place (no parameter
// is left to the deploy). A function, a grant or a parameter is written once, in template.yaml.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Stack, Token, Validations, type StackProps } from 'aws-cdk-lib';
import { CfnInclude } from 'aws-cdk-lib/cloudformation-include';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import * as sam from 'aws-cdk-lib/aws-sam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Bundling } from 'cargo-lambda-cdk/lib/bundling';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { loadTemplate, withoutSamMadeReferences, type CfnParameterDeclaration, type CfnTemplate, type SamMadeReference } from './template';

export type LambdaArchitecture = 'arm64' | 'x86_64';

/**
 * template.yaml's parameters, typed: each prop is the parameter of the same name (`stackNamePrefix` is
 * `StackNamePrefix`), with its default and its constraints (template.yaml says what each means). A list is a
 * CommaDelimitedList, a number a Number. The test checks that every parameter has its prop.
 */
export interface StackSyncParameters {
  /** `Architecture`: of the functions, and what their binaries are built for. @default 'x86_64' */
  readonly architecture?: LambdaArchitecture;
  /** `StackNamePrefix`: only stacks whose names start so may be managed; '' on purpose: any stack. @default 'stacksync-' */
  readonly stackNamePrefix?: string;
  /** `CloudFormationRoleArns`: the service roles stacks may name as `roleArn` (iam:PassRole). @default none */
  readonly cloudFormationRoleArns?: string[];
  /** `RequireRoleArn`: every entry must name its service role. @default true */
  readonly requireRoleArn?: boolean;
  /** `TargetAccountRoleArns`: the roles stacks may name as `assumeRoleArn`. @default none */
  readonly targetAccountRoleArns?: string[];
  /** `FleetRoleName`: the role a fleet's stacks are reached through in every account of its targets. @default none */
  readonly fleetRoleName?: string;
  /** `OrganizationsRoleArn`: the role the scheduler reads fleets' organizational units through. @default none: its own role */
  readonly organizationsRoleArn?: string;
  /** `WebhookSecretArn`: the webhook's secret (its full ARN). @default none: the webhook refuses every delivery */
  readonly webhookSecretArn?: string;
  /** `LogRetentionDays`: function and state machine logs. @default 30 */
  readonly logRetentionDays?: number;
  /** `ScheduleExpression`: how often the scheduler and the drift function run. @default 'rate(5 minutes)' */
  readonly scheduleExpression?: string;
  /** `MaxStartsPerRun`: the most reconciles one scheduler run starts (1 to 1000). @default 50 */
  readonly maxStartsPerRun?: number;
  /** `MaxDriftDetections`: the most drift detections at once per account and region (1 to 100). @default 10 */
  readonly maxDriftDetections?: number;
  /** `DriftReadPolicy`: the AWS managed policy the drift function reads the stacks' resources with, or 'none'. @default 'SecurityAudit' */
  readonly driftReadPolicy?: string;
  /** `Approvers`: IAM principal ARN patterns who may answer a change set that waits. @default none */
  readonly approvers?: string[];
  /** `AlarmTopicArn`: the SNS topic the alarms notify. @default none: no alarms */
  readonly alarmTopicArn?: string;
  /** `EventBusName`: where the runs' events go; 'none': nowhere. @default 'default' */
  readonly eventBusName?: string;
  /** `NotificationTopicArn`: the example rule's SNS topic. @default none: no rule */
  readonly notificationTopicArn?: string;
  /** `SourceBucketNames`: the buckets of the stacks' S3 sources. @default none */
  readonly sourceBucketNames?: string[];
  /** `SourceSecretArns`: Secrets Manager secrets holding Git credentials. @default none */
  readonly sourceSecretArns?: string[];
  /** `SourceParameterArns`: SSM parameters holding Git credentials. @default none */
  readonly sourceParameterArns?: string[];
  /** `ValueSecretArns`: Secrets Manager secrets the stacks' parameters may read. @default none */
  readonly valueSecretArns?: string[];
  /** `ValueParameterArns`: SSM parameters the stacks' parameters may read. @default none */
  readonly valueParameterArns?: string[];
  /** `CodeCommitRepositoryArns`: the CodeCommit repositories the stacks' sources name. @default none */
  readonly codeCommitRepositoryArns?: string[];
  /** `WebhookReservedConcurrency`: 0: none. @default 10 */
  readonly webhookReservedConcurrency?: number;
  /** `EventsReservedConcurrency`: 0: none. @default 5 */
  readonly eventsReservedConcurrency?: number;
  /** `RegistrySourceUrl`: the installation's first registry source (Git or s3://). @default none */
  readonly registrySourceUrl?: string;
  /** `RegistrySourceName`: its name. @default 'installation' */
  readonly registrySourceName?: string;
  /** `RegistrySourceRef`: the branch or tag it follows. @default 'main' */
  readonly registrySourceRef?: string;
  /** `RegistrySourcePath`: its stacks files (a file, a folder or a glob). @default 'stacks.yaml' */
  readonly registrySourcePath?: string;
  /** `RegistrySourceCredentialsArn`: the secret or parameter that opens it. @default none: a public source */
  readonly registrySourceCredentialsArn?: string;
  /** `PreviewForks`: whether pull requests from forks are previewed. @default false */
  readonly previewForks?: boolean;
  /**
   * `PolicySource`: the installation's Guard rules, checked on every template before its change set:
   * `{git: URL, ref: main, path: FOLDER}` or `{s3: "s3://bucket/rules.zip", path: FOLDER}`. @default none
   */
  readonly policySource?: string;
  /**
   * `SyncWindows`: when runs may change stacks, for every entry: a JSON list of windows, each
   * `{"allow" or "deny": CRON, "duration": "10h", "timeZone": "Europe/Berlin"}`. @default none (any time)
   */
  readonly syncWindows?: string;
  /**
   * `PublishParameterPath`: where entries may publish their outputs (`publish: {ssm: PATH}`): a path every
   * publish.ssm must start with, like `/stacksync/outputs/`. @default none (entries may not publish)
   */
  readonly publishParameterPath?: string;
  /** `MaxRunsPerAccount`: the most runs at once in one account and region (1 to 1000). @default 10 */
  readonly maxRunsPerAccount?: number;
}

export interface StackSyncProps extends StackProps, StackSyncParameters {
  /**
   * The Cargo workspace (the directory holding the root Cargo.toml, template.yaml and statemachine/).
   * @default the first directory above this file whose Cargo.toml has [workspace]
   */
  readonly workspaceRoot?: string;
  /**
   * The Cargo profile the functions are built with.
   * @default 'release' (what `sam build` uses)
   */
  readonly cargoProfile?: string;
}

/** The prop of a template parameter: its name, the first letter lower case. */
export function propName(parameter: string): string {
  return parameter.charAt(0).toLowerCase() + parameter.slice(1);
}

/**
 * Checks the template has no way to say (CommaDelimitedList parameters without an AllowedPattern): the operator's
 * typos fail the synthesis rather than the deploy. template.yaml could hold them as AllowedPatterns.
 */
const LIST_ELEMENTS: Record<string, { pattern: RegExp; what: string }> = {
  CloudFormationRoleArns: { pattern: /^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/, what: 'an IAM role ARN, no wildcards' },
  TargetAccountRoleArns: { pattern: /^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/, what: 'an IAM role ARN, no wildcards' },
  SourceBucketNames: { pattern: /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, what: 'an S3 bucket name' },
};

/** A parameter's value as CloudFormation gives it to `Ref`: a string, or a list of strings (`""` is `[""]`). */
export type ParameterValue = string | string[];

/**
 * The value of each parameter of `template` for `props`: the prop, checked against the parameter's declaration, or
 * else the parameter's default. Throws on a prop the parameter does not allow, naming the prop.
 */
export function parameterValues(template: CfnTemplate, props: StackSyncParameters): Record<string, ParameterValue> {
  const values: Record<string, ParameterValue> = {};
  for (const [name, declaration] of Object.entries(template.Parameters ?? {})) {
    const given = (props as Record<string, unknown>)[propName(name)];
    values[name] = given === undefined ? defaultValue(declaration) : checked(name, declaration, given);
  }
  return values;
}

function defaultValue(declaration: CfnParameterDeclaration): ParameterValue {
  const text = declaration.Default === undefined ? '' : String(declaration.Default);
  return declaration.Type === 'CommaDelimitedList' ? text.split(',').map((v) => v.trim()) : text;
}

function checked(name: string, declaration: CfnParameterDeclaration, given: unknown): ParameterValue {
  const prop = propName(name);
  const refuse = (value: unknown, why: string): never => {
    throw new Error(`${prop} ${JSON.stringify(value)}: ${why} (template.yaml's ${name})`);
  };
  const one = (value: unknown): string => {
    if (declaration.Type === 'Number') {
      if (typeof value !== 'number' || !Number.isInteger(value)) refuse(value, 'a whole number');
      const n = value as number;
      if (declaration.MinValue !== undefined && n < declaration.MinValue) refuse(n, `at least ${declaration.MinValue}`);
      if (declaration.MaxValue !== undefined && n > declaration.MaxValue) refuse(n, `at most ${declaration.MaxValue}`);
    } else if (typeof value !== 'string' && !(typeof value === 'boolean' && declaration.AllowedValues?.includes(String(value)))) {
      refuse(value, 'a string');
    }
    const text = String(value);
    if (declaration.AllowedValues !== undefined && !declaration.AllowedValues.map(String).includes(text)) {
      refuse(value, `one of ${declaration.AllowedValues.join(', ')}`);
    }
    if (declaration.AllowedPattern !== undefined && !new RegExp(declaration.AllowedPattern).test(text)) {
      refuse(value, `does not match ${declaration.AllowedPattern}`);
    }
    const extra = LIST_ELEMENTS[name];
    if (extra !== undefined && !extra.pattern.test(text)) refuse(value, `not ${extra.what}`);
    return text;
  };
  if (declaration.Type !== 'CommaDelimitedList') return one(given);
  if (!Array.isArray(given)) return refuse(given, 'a list');
  for (const value of given) if (String(value).includes(',')) refuse(value, 'an element of a list holds no comma');
  return given.length === 0 ? [''] : given.map(one);
}

/** The directory holding the Cargo workspace's Cargo.toml, searched upwards from `start`. */
export function findWorkspaceRoot(start: string = __dirname): string {
  for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'Cargo.toml');
    if (fs.existsSync(manifest) && /^\[workspace\]/m.test(fs.readFileSync(manifest, 'utf8'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no Cargo workspace (a Cargo.toml with [workspace]) in ${start} or above`);
  }
}

/** A function of the template: its logical ID and the Cargo binary it runs (`Metadata.BuildProperties.Binary`). */
export interface TemplateFunction {
  readonly logicalId: string;
  readonly binary: string;
}

/** The template's functions (`AWS::Serverless::Function`), each built with cargo-lambda (`BuildMethod: rust-cargolambda`). */
export function templateFunctions(template: CfnTemplate): TemplateFunction[] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === 'AWS::Serverless::Function')
    .map(([logicalId, r]) => {
      const binary = r.Metadata?.BuildProperties?.Binary;
      if (r.Metadata?.BuildMethod !== 'rust-cargolambda' || typeof binary !== 'string') {
        throw new Error(`${logicalId}: only functions built with BuildMethod rust-cargolambda and a BuildProperties.Binary are packaged`);
      }
      return { logicalId, binary };
    });
}

/** Stands for a `Fn::GetAtt` of a resource the SAM transform makes, while CfnInclude reads the template. */
const SAM_MADE = 'stacksync:sam-made-reference';

export class StackSyncStack extends Stack {
  /** template.yaml as included: `getResource('<logical ID>')` is any of its resources, as its L1 construct. */
  readonly template: CfnInclude;
  /** The value each of template.yaml's parameters was given (the props, or the parameter's default). */
  readonly parameterValues: Readonly<Record<string, ParameterValue>>;
  /** The registry (`RegistryTable`). */
  readonly table: dynamodb.ITable;
  /**
   * The artifact bucket (`ArtifactBucket`). Its policy is template.yaml's `ArtifactBucketPolicy` (an imported
   * bucket: `addToResourcePolicy` adds nothing, for a second bucket policy would replace that one).
   */
  readonly bucket: s3.IBucket;
  /** The reconcile state machine (`ReconcileStateMachine`). */
  readonly stateMachine: sfn.IStateMachine;
  /** The functions, by their logical ID without `Function` (`ArtifactFetch`, `Webhook`, ...). */
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  /** The functions' L1 constructs (`AWS::Serverless::Function`), by the same keys. */
  readonly samFunctions: Readonly<Record<string, sam.CfnFunction>>;
  /** The webhook's public Function URL (the output `WebhookUrl`). */
  readonly webhookUrl: string;
  /** The answer function's IAM-authorised Function URL (the output `AnswerUrl`). */
  readonly answerUrl: string;

  constructor(scope: Construct, id: string, props: StackSyncProps = {}) {
    super(scope, id, props);
    const root = props.workspaceRoot ?? findWorkspaceRoot();
    const templateFile = path.join(root, 'template.yaml');
    const source = loadTemplate(templateFile);
    this.parameterValues = parameterValues(source, props);

    // CfnInclude reads a file: template.yaml as JSON, the references to what SAM makes set aside.
    const { template: readable, references } = withoutSamMadeReferences(source, SAM_MADE);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stacksync-template-'));
    try {
      const file = path.join(dir, 'template.json');
      fs.writeFileSync(file, JSON.stringify(readable));
      this.template = new CfnInclude(this, 'Template', { templateFile: file, parameters: { ...this.parameterValues } });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    for (const ref of references) {
      if (ref.section === 'Outputs') this.template.getOutput(ref.logicalId).value = Token.asString(ref.value);
      else this.template.getResource(ref.logicalId).addOverride(ref.path.join('.'), ref.value);
    }

    // What `sam build` and `sam package` do: each function's code, the state machine's definition, as assets.
    const architecture = this.parameterValues.Architecture === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64;
    const functions: Record<string, lambda.IFunction> = {};
    const samFunctions: Record<string, sam.CfnFunction> = {};
    for (const { logicalId, binary } of templateFunctions(source)) {
      const fn = this.template.getResource(logicalId) as sam.CfnFunction;
      const code = Bundling.bundle({
        manifestPath: path.join(path.dirname(templateFile), String(fn.codeUri), 'Cargo.toml'),
        binaryName: binary,
        architecture,
        profile: props.cargoProfile ?? 'release',
      }).bind(new Construct(this, `${logicalId}Code`));
      fn.codeUri = { bucket: code.s3Location!.bucketName, key: code.s3Location!.objectKey };
      const key = logicalId.replace(/Function$/, '');
      samFunctions[key] = fn;
      functions[key] = lambda.Function.fromFunctionAttributes(this, `${logicalId}Handle`, {
        functionArn: fn.getAtt('Arn').toString(),
        sameEnvironment: true,
        skipPermissions: true,
      });
    }
    this.functions = functions;
    this.samFunctions = samFunctions;
    for (const [logicalId, r] of Object.entries(source.Resources)) {
      if (r.Type !== 'AWS::Serverless::StateMachine' || typeof r.Properties?.DefinitionUri !== 'string') continue;
      const definition = new s3assets.Asset(this, `${logicalId}Definition`, {
        path: path.join(path.dirname(templateFile), r.Properties.DefinitionUri),
      });
      (this.template.getResource(logicalId) as sam.CfnStateMachine).definitionUri = {
        bucket: definition.s3BucketName,
        key: definition.s3ObjectKey,
      };
    }

    // Typed handles on what the template made.
    const table = this.template.getResource('RegistryTable') as dynamodb.CfnTable;
    this.table = dynamodb.Table.fromTableAttributes(this, 'RegistryTableHandle', {
      tableName: table.ref,
      globalIndexes: (table.globalSecondaryIndexes as dynamodb.CfnTable.GlobalSecondaryIndexProperty[]).map((i) => i.indexName),
    });
    const bucket = this.template.getResource('ArtifactBucket') as s3.CfnBucket;
    this.bucket = s3.Bucket.fromBucketAttributes(this, 'ArtifactBucketHandle', {
      bucketArn: bucket.attrArn,
      bucketName: bucket.ref,
      bucketRegionalDomainName: bucket.attrRegionalDomainName,
    });
    this.stateMachine = sfn.StateMachine.fromStateMachineArn(this, 'StateMachineHandle', this.template.getResource('ReconcileStateMachine').ref);
    this.webhookUrl = this.template.getOutput('WebhookUrl').value;
    this.answerUrl = this.template.getOutput('AnswerUrl').value;

    this.acknowledge(source, references);
  }

  /** Why the findings of CDK's template validation and of cdk-nag on the included template are as they should be. */
  private acknowledge(source: CfnTemplate, references: SamMadeReference[]): void {
    const madeBySam = (section: string) =>
      [...new Set(references.filter((r) => r.section === section).map((r) => r.value['Fn::GetAtt'][0]))].join(', ');
    const constants =
      "Every parameter of template.yaml is given its value (a prop or the parameter's default) when the stack is " +
      'synthesized, so each condition on one compares constants: it says which optional resources and statements these props make.';
    Validations.of(this).acknowledge(
      {
        id: 'CloudFormation-Validate::F1020',
        reason: `The SAM transform makes ${madeBySam('Resources')} when CloudFormation deploys the stack (template.yaml names them as for sam deploy).`,
      },
      {
        id: 'CloudFormation-Validate::F6101',
        reason: `The outputs name ${madeBySam('Outputs')}, which the SAM transform makes when CloudFormation deploys the stack.`,
      },
      { id: 'CloudFormation-Validate::W8003', reason: constants },
      { id: 'CloudFormation-Validate::W9053', reason: constants },
    );
    // A resource template.yaml makes only on a condition (an alarm with AlarmTopicArn, ...) may hold the empty
    // value of its parameter when the condition does not hold, and CloudFormation then does not make it.
    for (const [logicalId, r] of Object.entries(source.Resources)) {
      if (r.Condition === undefined) continue;
      Validations.of(this.template.getResource(logicalId)).acknowledge({
        id: 'CloudFormation-Validate::F3033',
        reason: `Made only when the condition ${r.Condition} holds: with the empty value of its parameter it is not made.`,
      });
    }
    // cdk-nag checks the included resources it knows (not the AWS::Serverless::* ones, whose roles the IAM
    // conformance test checks, as template.yaml's).
    NagSuppressions.addResourceSuppressions(this.template.getResource('ArtifactBucket'), [
      {
        id: 'AwsSolutions-S1',
        reason:
          "No server access logs, as template.yaml (.checkov.yaml, CKV_AWS_18): they need a second bucket; the bucket holds templates and Git archives only, and CloudTrail data events are the audit trail if one is required.",
      },
    ]);
    NagSuppressions.addResourceSuppressions(this.template.getResource('DriftReadGapsPolicy'), [
      {
        id: 'AwsSolutions-IAM5',
        appliesTo: ['Resource::*', 'Resource::arn:<AWS::Partition>:apigateway:*::/restapis/*', 'Resource::arn:<AWS::Partition>:apigateway:*::/apis/*'],
        reason:
          "Drift detection reads every resource of a stack with the caller's credentials (the drift function's role), and which " +
          'resources the managed stacks hold is up to their templates: the read actions of common resource types that ' +
          "SecurityAudit lacks (from the types' CloudFormation read handlers), read-only, on any resource of the type (several " +
          'support no resource-level permission, and API Gateway APIs are named by generated ids in any region). Made only ' +
          'with DriftReadPolicy SecurityAudit (template.yaml).',
      },
    ]);
  }
}
