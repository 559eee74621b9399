/**
 * What a rank's log line tells, for what a batch log keeps (`molotof run --log events`):
 * `warning`, something passed over or going wrong (a skipped checkpoint, a refused peer, a costly policy);
 * `notice`, a choice the run made on its own that a batch log must show (a `--resume-or-start` that started
 * afresh). A line without a kind is informational (a recovery's figures, the program's own lines).
 */
export type LogKind = 'warning' | 'notice'

/**
 * A rank's log: a line, a key said once per run (`once`), and its kind. The layers below the runtime (the
 * checkpoint code) log through it and say the kind of what they log.
 *
 * ```ts
 * log(`warning: ${recoveryWarningText(w)}`, undefined, 'warning')
 * ```
 */
export type RankLog = (text: string, once?: string, kind?: LogKind) => void
