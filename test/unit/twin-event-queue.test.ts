import { expect, test } from "bun:test";
import { EventQueue } from "../../src/twin/event-queue.ts";

test("events run in time order, ties in the order they were scheduled, each at its own time", () => {
  const q = new EventQueue();
  const ran: [string, number][] = [];
  const note = (name: string) => () => ran.push([name, q.now]);
  q.at(30, note("c"));
  q.at(10, note("a"));
  q.at(30, note("d"));
  q.at(20, note("b"));
  q.at(10, () => {
    ran.push(["a2", q.now]);
    // Scheduled from inside an event: a time already past runs next, at now.
    q.at(5, note("late"));
    q.after(15, note("b2"));
  });
  expect(q.run()).toBe(7);
  expect(ran).toEqual([
    ["a", 10],
    ["a2", 10],
    ["late", 10],
    ["b", 20],
    ["b2", 25],
    ["c", 30],
    ["d", 30],
  ]);
  expect(q.size).toBe(0);
  expect(q.nextAt()).toBe(Infinity);
});

test("run stops before events due after `until`, and when told to stop", () => {
  const q = new EventQueue();
  let n = 0;
  for (let t = 1; t <= 100; t++) q.at(t, () => n++);
  expect(q.run(40)).toBe(40);
  expect(q.now).toBe(40);
  expect(q.nextAt()).toBe(41);
  expect(q.run(Infinity, () => n >= 50)).toBe(10);
  expect(q.run()).toBe(50);
  expect(n).toBe(100);
});

test("a thousand events scheduled in random order come out sorted", () => {
  const q = new EventQueue();
  const times = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 1000);
  const seen: number[] = [];
  for (const t of times) q.at(t, () => seen.push(q.now));
  q.run();
  expect(seen).toEqual([...times].sort((a, b) => a - b));
});
