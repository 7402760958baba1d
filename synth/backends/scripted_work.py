"""Delegation talk of the scripted planner: a task's request and acknowledgement, the work item
it opens, the talk while it runs (a progress question, a second task, side talk, a follow-up),
a cancel or a superseding request, and the results as they come.

:class:`Delegating` is a part of the planner's session builder (``scripted_planner._Builder``):
it uses the builder's ``script``, ``add``, ``choose``, ``rate`` and ``pickc``.
"""

from __future__ import annotations

from ..schema.plan import PlannedEvent, PlannedWork
from .frames import fill
from .script import Task

FAILURE_P = 0.12  # share of work items whose backend fails
SILENT_P = 0.15  # share of delegations opened silently, without a spoken acknowledgement


class Delegating:
    """The builder's delegation turns (a mixin of ``scripted_planner._Builder``)."""

    def new_work(self, t: Task, opener: PlannedEvent) -> PlannedWork:
        d = t.delegation
        fails = self.rng.random() < FAILURE_P
        w = PlannedWork(work_id=f"w{len(self.work) + 1}", tool=d.tool, objective=t.say(d.objective),
                        result_text=t.say(self.choose(d.failure if fails else d.result)), opened_by=opener.id,
                        outcome="failure" if fails else "success")
        self.work.append(w)
        self.script.log["work"][w.work_id] = {k: v for k, v in sorted(t.values.items()) if k != "topic"}
        return w

    def update_work(self, work_id: str, **changes) -> None:
        """A work item as the talk after it fills it in: its progress note, what cancelled it."""
        i = next(i for i, w in enumerate(self.work) if w.work_id == work_id)
        self.work[i] = self.work[i].model_copy(update=changes)

    def delegate(self, t: Task, after: PlannedEvent, act="delegate_request", text: str | None = None, tags=()):
        """Request, then the spoken ack that opens the work item (or, sometimes, no ack: the
        system opens the item silently after the request, R6). A task of another frame than the
        one talked about is asked for as a new topic ("By the way, ..."), and the talk after it
        goes back to the topic marked the same way."""
        s = self.script
        away = text is None and t.frame_id != s.frame.id
        m = self.pickc("topic_marker") if away else ""
        req = self.add("user", act, text or self.marked(m, t.say(self.choose(t.user))), "take", "responds_to", after,
                       list(tags))
        if away:
            s.note_switch(req.id, s.frame.id, t.frame_id, "marked", m)
            s.switched, s.returning = t.frame_id, True  # the next line on the session's topic comes back to it
        s.settle(t)
        if self.rng.random() < SILENT_P:
            return req, req, self.new_work(t, req)
        ack = self.add("system", "acknowledge", t.say(self.choose(t.delegation.ack)), "take", "responds_to", req,
                       ["delegate_with_ack"])
        return req, ack, self.new_work(t, ack)

    def delegation(self, after: PlannedEvent) -> PlannedEvent:
        """Request, ack and private span; talk while it runs; maybe a progress question, a second
        request in flight, a cancel or a superseding request; then the results as they come. With
        no task left to ask for (the answers reported them done), an ordinary exchange instead."""
        s = self.script
        t = s.task()
        if t is None:
            return self.exchange(after)
        used = [t.origin]
        _, last, w = self.delegate(t, after)
        pending = [w]
        if self.rate("progress_question"):
            p = self.choose(t.delegation.progress)
            q = self.add("user", "progress_question", self.pickc("progress_question"), "take", "responds_to", last,
                         ["progress_question"])
            last = self.add("system", "progress_answer", t.say(p.system), "take", "responds_to", q,
                            work_id=w.work_id)
            self.update_work(w.work_id, progress_text=t.say(p.note), progress_by=last.id)
        if self.rate("continue_while_working"):
            r = self.rng.random()
            t2 = s.task(exclude=used)
            if r < 0.35 and t2 is not None:  # a second request while the first runs
                used.append(t2.origin)
                _, last, w2 = self.delegate(t2, last, tags=["continue_while_working"])
                pending.append(w2)
            elif r < 0.65 and self.tp and not self.open_q:  # no side talk over a question
                last = self.side_talk(last, tags=["continue_while_working"])
            else:
                unit = s.next_followup()
                m = self.marker()
                q = self.add("user", "followup", self.marked(m, self.user_line(unit)), "take", "responds_to",
                             last, ["continue_while_working"])
                self.note(q, m)
                last = self.add("system", "answer", self.answer_text(unit), "take", "responds_to", q)
        if self.rate("stale_result_dropped"):
            sup = t.delegation.supersede
            if self.rng.random() < 0.5 or not sup:
                task = t.name()
                c = self.add("user", "cancel_request", fill(self.pickc("cancel"), {"task": task}), "take",
                             "responds_to", last, ["stale_result_dropped"], work_id=w.work_id)
                last = self.add("system", "cancel_ack", fill(self.pickc("cancel_ack"), {"task": task}), "take",
                                "responds_to", c)
                if t.frame_id == s.frame.id:  # the topic's own task dropped: its follow-ups would ask after
                    s.followups = []          # it ("多久能放款？" after the loan was cancelled); the talk moves on
            else:
                sp = self.choose(sup)
                old = t.values[sp.slot]
                pool = t.delegation.slots.get(sp.slot) or s.frame.slots.get(sp.slot) or [old]
                new = s.other_value(pool, old)
                t3 = Task(t.delegation, {**t.values, sp.slot: new}, t.frame_id)
                line = fill(self.choose(sp.user), {**t.values, "old": old, "new": new})
                if t.frame_id == s.frame.id and sp.slot in s.values:  # the user changed their mind: the rest of the session uses it
                    s.values[sp.slot] = new
                    s.values["topic"] = fill(s.frame.topic, s.values)
                c, last, w3 = self.delegate(t3, last, "supersede_request", line, ["stale_result_dropped"])
                pending.append(w3)
                s.log["supersedes"].append({"event": c.id, "work_id": w.work_id, "by": w3.work_id,
                                            "slot": sp.slot, "old": old, "new": new})
            self.update_work(w.work_id, cancelled_by=c.id)
            pending.remove(w)
        for item in pending:
            last = self.add("system", "deliver_result", item.result_text, "take", "delivers_result_of",
                            item.work_id, ["result_at_silence_gap"], work_id=item.work_id)
        return last
