-- title: Orders in a period
-- description: Every order placed in [from, to), with its customer and product.
-- source: shop
-- param: from date "From" = 2025-01-01
-- param: to date "To (exclusive)" after=from = 2025-02-01
-- sheet: Orders
-- count: true
-- resume: id
-- filename: orders-{from}-{to}
-- column: id "Order" int
-- column: created_at "Created" datetime(yyyy-mm-dd hh:mm)
-- column: customer "Customer"
-- column: country "Country"
-- column: product "Product"
-- column: category "Category"
-- column: quantity "Quantity" int
-- column: unit_price "Unit price" number(#,##0.00)
-- column: total "Total" number(#,##0.00)
-- column: status "Status"
-- column: paid "Paid" bool
-- column: note "Note"
SELECT o.id, o.created_at, c.name AS customer, c.country, p.name AS product, p.category,
       o.quantity, o.unit_price, o.total, o.status, o.paid, o.note
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN products p ON p.id = o.product_id
WHERE o.created_at >= :from AND o.created_at < :to
ORDER BY o.id;
