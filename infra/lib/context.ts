// StackSyncProps from the CDK context: cdk.json's "context", or
// `npx cdk deploy -c stackNamePrefix=prod- -c cloudFormationRoleArns=arn1,arn2`.
import type { Node } from 'constructs';
import type { LambdaArchitecture, StackSyncProps } from './stacksync-stack';

/** The context keys the app reads (besides `stackName`, the CloudFormation stack's name). */
export const CONTEXT_KEYS = [
  'stackNamePrefix',
  'requireRoleArn',
  'cloudFormationRoleArns',
  'targetAccountRoleArns',
  'webhookSecretArn',
  'alarmTopicArn',
  'eventBusName',
  'notificationTopicArn',
  'logRetentionDays',
  'architecture',
  'scheduleExpression',
  'maxStartsPerRun',
  'maxDriftDetections',
  'driftReadPolicy',
  'approvers',
  'sourceBucketNames',
  'sourceSecretArns',
  'sourceParameterArns',
  'valueSecretArns',
  'valueParameterArns',
  'codeCommitRepositoryArns',
  'webhookReservedConcurrency',
  'eventsReservedConcurrency',
] as const;

/** A list from the context: a JSON array (cdk.json) or a comma-separated string (`-c key=a,b`). */
function list(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) return value.map((v) => String(v).trim()).filter((v) => v !== '');
  return String(value)
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

/** A boolean from the context: true or false (JSON, or `-c key=true`). */
function bool(key: string, value: unknown): boolean {
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new Error(`${key} "${String(value)}": true or false`);
}

export function propsFromContext(node: Node): StackSyncProps {
  const get = (key: (typeof CONTEXT_KEYS)[number]): unknown => node.tryGetContext(key);
  const days = get('logRetentionDays');
  const maxStarts = get('maxStartsPerRun');
  const number = (key: (typeof CONTEXT_KEYS)[number]): number | undefined => (get(key) === undefined ? undefined : Number(get(key)));
  return {
    stackNamePrefix: get('stackNamePrefix') === undefined ? undefined : String(get('stackNamePrefix')),
    requireRoleArn: get('requireRoleArn') === undefined ? undefined : bool('requireRoleArn', get('requireRoleArn')),
    cloudFormationRoleArns: list(get('cloudFormationRoleArns')),
    targetAccountRoleArns: list(get('targetAccountRoleArns')),
    webhookSecretArn: get('webhookSecretArn') === undefined ? undefined : String(get('webhookSecretArn')).trim(),
    alarmTopicArn: get('alarmTopicArn') === undefined ? undefined : String(get('alarmTopicArn')).trim(),
    eventBusName: get('eventBusName') === undefined ? undefined : String(get('eventBusName')).trim(),
    notificationTopicArn: get('notificationTopicArn') === undefined ? undefined : String(get('notificationTopicArn')).trim(),
    logRetentionDays: days === undefined ? undefined : Number(days),
    architecture: get('architecture') === undefined ? undefined : (String(get('architecture')) as LambdaArchitecture),
    scheduleExpression: get('scheduleExpression') === undefined ? undefined : String(get('scheduleExpression')).trim(),
    maxStartsPerRun: maxStarts === undefined ? undefined : Number(maxStarts),
    maxDriftDetections: number('maxDriftDetections'),
    driftReadPolicy: get('driftReadPolicy') === undefined ? undefined : String(get('driftReadPolicy')).trim(),
    approvers: list(get('approvers')),
    sourceBucketNames: list(get('sourceBucketNames')),
    sourceSecretArns: list(get('sourceSecretArns')),
    sourceParameterArns: list(get('sourceParameterArns')),
    valueSecretArns: list(get('valueSecretArns')),
    valueParameterArns: list(get('valueParameterArns')),
    codeCommitRepositoryArns: list(get('codeCommitRepositoryArns')),
    webhookReservedConcurrency: number('webhookReservedConcurrency'),
    eventsReservedConcurrency: number('eventsReservedConcurrency'),
  };
}
