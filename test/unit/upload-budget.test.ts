import { expect, test } from "bun:test";
import { LlmgwError } from "../../src/shared/errors.ts";
import { BudgetShare, UploadBudget } from "../../src/shared/upload-budget.ts";

test("a share grows to what its body holds, refuses past the budget with 503 and Retry-After, and gives back once", () => {
  const budget = new UploadBudget(100);
  const a = new BudgetShare(budget);
  a.growTo(60);
  a.growTo(40); // never shrinks while held
  expect(budget.held).toBe(60);
  const b = new BudgetShare(budget);
  let refusal: unknown;
  try {
    b.growTo(50);
  } catch (err) {
    refusal = err;
  }
  expect(refusal).toBeInstanceOf(LlmgwError);
  expect((refusal as LlmgwError).code).toBe("UPLOAD_BUDGET_EXHAUSTED");
  expect((refusal as LlmgwError).status).toBe(503);
  expect((refusal as LlmgwError).retryAfterS).toBe(1);
  b.release();
  expect(budget.held).toBe(60);
  a.release();
  a.release();
  a.growTo(80); // a read still finishing after release takes nothing
  expect(budget.held).toBe(0);
});
