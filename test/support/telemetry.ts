/**
 * OpenTelemetry's SDK set up for tests: spans go to an in-memory exporter, metrics to an
 * in-memory exporter read on demand. Both are registered as the API's global providers, as an
 * application would, because that is where latchkey reports.
 */
import { metrics, trace, type Attributes } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

export interface TestTelemetry {
  /** Spans ended since the last reset(). */
  spans(name?: string): ReadableSpan[];
  /** Every metric recorded since the last reset(), read now. */
  metrics(): Promise<MetricData[]>;
  /**
   * The sum of a counter's or up-down counter's points, or the count of a histogram's, whose
   * attributes include `attributes`; 0 when there is none.
   */
  value(name: string, attributes: Attributes): Promise<number>;
  /** The sum of a histogram's points whose attributes include `attributes`. */
  histogramSum(name: string, attributes: Attributes): Promise<number>;
  /**
   * Forgets spans and starts a new MeterProvider: metrics start from zero for the LockClients
   * created after this call (a client takes its meter when it is made).
   */
  reset(): Promise<void>;
  shutdown(): Promise<void>;
}

function matches(point: Attributes, wanted: Attributes): boolean {
  return Object.entries(wanted).every(([key, value]) => point[key] === value);
}

/** Registers in-memory trace and metric pipelines as the global providers. */
export function registerTestTelemetry(): TestTelemetry {
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });
  trace.setGlobalTracerProvider(tracerProvider);

  let metricExporter: InMemoryMetricExporter;
  let reader: PeriodicExportingMetricReader;
  let meterProvider: MeterProvider | undefined;
  const startMetrics = async (): Promise<void> => {
    await meterProvider?.shutdown();
    metrics.disable();
    metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    // Read on demand only (forceFlush); the interval never comes round in a test.
    reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
    meterProvider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meterProvider);
  };
  let started = startMetrics();

  const readMetrics = async (): Promise<MetricData[]> => {
    await started;
    metricExporter.reset();
    await reader.forceFlush();
    // Cumulative: the latest export holds every point so far.
    const latest = metricExporter.getMetrics().at(-1);
    return latest?.scopeMetrics.flatMap((scope) => scope.metrics) ?? [];
  };

  const points = async (name: string, attributes: Attributes) => {
    const all = (await readMetrics()).filter((metric) => metric.descriptor.name === name);
    return all.flatMap((metric) =>
      metric.dataPoints
        .filter((point) => matches(point.attributes, attributes))
        .map((point) => ({ type: metric.dataPointType, value: point.value })),
    );
  };

  return {
    spans(name) {
      const all = spanExporter.getFinishedSpans();
      return name === undefined ? [...all] : all.filter((span) => span.name === name);
    },
    metrics: readMetrics,
    async value(name, attributes) {
      let total = 0;
      for (const point of await points(name, attributes)) {
        total +=
          point.type === DataPointType.HISTOGRAM
            ? (point.value as { count: number }).count
            : (point.value as number);
      }
      return total;
    },
    async histogramSum(name, attributes) {
      let total = 0;
      for (const point of await points(name, attributes)) {
        if (point.type !== DataPointType.HISTOGRAM) throw new Error(`${name} is not a histogram`);
        total += (point.value as { sum?: number }).sum ?? 0;
      }
      return total;
    },
    async reset() {
      spanExporter.reset();
      await started;
      started = startMetrics();
      await started;
    },
    async shutdown() {
      await started;
      await meterProvider?.shutdown();
      await tracerProvider.shutdown();
      metrics.disable();
      trace.disable();
    },
  };
}

/**
 * Every string that telemetry recorded anywhere: span names, attribute values, event names and
 * attributes, status messages, and every metric point's attribute values.
 */
export async function everythingRecorded(telemetry: TestTelemetry): Promise<string[]> {
  const texts: string[] = [];
  const addAttributes = (attributes: Attributes | undefined): void => {
    for (const [key, value] of Object.entries(attributes ?? {})) texts.push(key, String(value));
  };
  for (const span of telemetry.spans()) {
    texts.push(span.name, span.status.message ?? '');
    addAttributes(span.attributes);
    for (const event of span.events) {
      texts.push(event.name);
      addAttributes(event.attributes);
    }
  }
  for (const metric of await telemetry.metrics()) {
    texts.push(metric.descriptor.name);
    for (const point of metric.dataPoints) addAttributes(point.attributes);
  }
  return texts;
}
