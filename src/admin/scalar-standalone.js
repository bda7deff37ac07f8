// Scalar's standalone API reference bundle, as a file path: the file itself in
// node_modules, or inside the binary under `bun build --compile`. A .js file
// with its .d.ts beside it because Scalar publishes no types for the bundle.
import standalone from "../../node_modules/@scalar/api-reference/dist/browser/standalone.js" with { type: "file" };

export default standalone;
